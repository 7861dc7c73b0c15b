"""The few calls of Label Studio's REST API the end-to-end check makes, with a legacy token.

Every call that Label Studio does not answer with 200 or 201 raises ``E2EError`` with the
status and the start of the body.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from tests.harness.labelstudio_servers import BasicAuth, E2EError

__all__ = ["LabelStudio"]

HTTP_TIMEOUT_S = 120.0


class LabelStudio:
    """A client of one Label Studio, acting as its admin."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Token {token}"}, timeout=HTTP_TIMEOUT_S
        )

    def close(self) -> None:
        self.http.close()

    def personal_access_token(self) -> str:
        """A new personal access token (a JWT refresh token) of the admin."""
        token: str = self._json(self.http.post("/api/token/"))["token"]
        return token

    def create_project(self, title: str, label_config: str) -> int:
        body = {"title": title, "label_config": label_config}
        project_id: int = self._json(self.http.post("/api/projects", json=body))["id"]
        return project_id

    def upload_image(self, project: int, path: Path) -> None:
        """Import an image file: Label Studio stores it and makes a task of ``/data/upload/…``."""
        with path.open("rb") as image:
            files = {"file": (path.name, image, "image/png")}
            self._json(self.http.post(f"/api/projects/{project}/import", files=files))

    def sync_local_files(self, project: int, folder: Path) -> None:
        """Add ``folder`` as the project's local files storage and sync it: one task per image,
        referencing it as ``/data/local-files/?d=<path under the document root>``."""
        storage = self.add_local_files(project, folder)
        self._json(self.http.post(f"/api/storages/localfiles/{storage}/sync"))

    def add_local_files(self, project: int, folder: Path) -> int:
        """Add ``folder`` as a local files storage of the project, without syncing it: Label
        Studio then serves the project's tasks the files under it. The storage's id."""
        body = {"project": project, "path": str(folder), "use_blob_urls": True, "title": "files"}
        storage_id: int = self._json(self.http.post("/api/storages/localfiles/", json=body))["id"]
        return storage_id

    def import_tasks(self, project: int, tasks: list[dict[str, Any]]) -> dict[str, Any]:
        """Import tasks (with their predictions) as the Import dialog imports a JSON file."""
        report: dict[str, Any] = self._json(
            self.http.post(f"/api/projects/{project}/import", json=tasks)
        )
        return report

    def file_status(self, reference: str) -> int:
        """The HTTP status Label Studio answers when asked for a task's image."""
        return self.http.get(reference).status_code

    def tasks(self, project: int) -> list[dict[str, Any]]:
        response = self.http.get("/api/tasks", params={"project": project})
        tasks: list[dict[str, Any]] = self._json(response)["tasks"]
        return tasks

    def connect_backend(self, project: int, url: str, auth: BasicAuth) -> dict[str, Any]:
        """Add the ML backend, as the project's Model settings do; Label Studio checks
        ``/health`` and calls ``/setup`` before it answers."""
        body = {
            "project": project,
            "url": url,
            "title": "camserve",
            "auth_method": "BASIC_AUTH",
            "basic_auth_user": auth.user,
            "basic_auth_pass": auth.password,
        }
        backend: dict[str, Any] = self._json(self.http.post("/api/ml", json=body))
        return backend

    def authorize_webhook(self, project: int, url: str, auth: BasicAuth) -> None:
        """Give the webhook that Label Studio created along with the backend (to ``url``, sent
        without credentials) the basic-auth header the backend requires."""
        hooks = self._json(self.http.get("/api/webhooks/", params={"project": project}))
        ours = [hook for hook in hooks if hook["url"] == url]
        if not ours:
            raise E2EError(f"Label Studio created no webhook to {url}; it has {hooks}")
        token = base64.b64encode(f"{auth.user}:{auth.password}".encode()).decode()
        for hook in ours:
            body = {"headers": {"Authorization": f"Basic {token}"}}
            self._json(self.http.patch(f"/api/webhooks/{hook['id']}/", json=body))

    def retrieve_predictions(self, project: int) -> dict[str, Any]:
        """The data manager's "Retrieve Predictions" action on every task of the project."""
        response = self.http.post(
            "/api/dm/actions",
            params={"id": "retrieve_tasks_predictions", "project": project},
            json={"selectedItems": {"all": True, "excluded": []}},
        )
        result: dict[str, Any] = self._json(response)
        return result

    def predictions(self, task: int) -> list[dict[str, Any]]:
        response = self.http.get("/api/predictions", params={"task": task})
        predictions: list[dict[str, Any]] = self._json(response)
        return predictions

    def accept(self, prediction: Mapping[str, Any]) -> dict[str, Any]:
        """Submit a prediction unchanged as its task's annotation, as an annotator who accepts
        the pre-annotation does (Label Studio then sends ANNOTATION_CREATED to the webhook)."""
        body = {"result": prediction["result"], "parent_prediction": prediction["id"]}
        response = self.http.post(f"/api/tasks/{prediction['task']}/annotations", json=body)
        annotation: dict[str, Any] = self._json(response)
        return annotation

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        if response.status_code not in (200, 201):
            raise E2EError(
                f"Label Studio answered {response.request.method} {response.request.url.path} "
                f"with HTTP {response.status_code}: {response.text[:1000]}"
            )
        return response.json()
