// Calls to camserve's HTTP API from the page: the API key goes along as a bearer token, and a
// failed call becomes an ApiError carrying the API's own code and message.

/** A refused or failed call; `message` is the API's wording when it sent one. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

// How often the page looks at a job's progress, in milliseconds.
const POLL_MS = 200;

export class Api {
  /**
   * `readKey` returns the API key to send ('' for none); `onAnswer(body)` sees each explanation;
   * `onProgress(job, fraction)` hears how far each Score-CAM request is (0 to 1).
   */
  constructor(readKey, onAnswer = () => {}, onProgress = () => {}) {
    this.readKey = readKey;
    this.onAnswer = onAnswer;
    this.onProgress = onProgress;
  }

  /** GET /v1/models: the served models and the ones that failed to load. */
  async models(signal) {
    const response = await this.send('/v1/models', { signal });
    return response.json();
  }

  /** GET /v1/models/{name}/report: the model's explanation report, or how far it has come. */
  async report(name, signal) {
    const response = await this.send(`/v1/models/${encodeURIComponent(name)}/report`, { signal });
    return response.json();
  }

  /**
   * POST /v1/explain with `file` as the multipart field `image`. A Score-CAM request runs as a
   * job (Prefer: respond-async) whose progress the page follows until its answer is ready.
   */
  async explain(file, params, signal) {
    const init = { method: 'POST', body: imageForm(file), signal };
    const path = `/v1/explain?${query(params)}`;
    const response = isLong(params) ? await this.followed(path, init, signal) : await this.send(path, init);
    const body = await response.json();
    this.onAnswer(body);
    return body;
  }

  /** The final answer of the job `path` starts, polled every POLL_MS; cancelled on abort. */
  async followed(path, init, signal) {
    let response = await this.send(path, { ...init, headers: { Prefer: 'respond-async' } });
    const location = response.status === 202 ? response.headers.get('Location') : null;
    if (!location) return response;
    try {
      while (response.status === 202) {
        this.onProgress(location, (await response.json()).progress);
        await pause(POLL_MS, signal);
        response = await this.send(location, { signal });
      }
    } catch (error) {
      if (signal?.aborted) this.send(location, { method: 'DELETE' }).catch(() => {});
      throw error;
    }
    this.onProgress(location, 1);
    return response;
  }

  /** POST /v1/cam: the overlay image as a Blob. */
  async overlay(file, params, signal) {
    const response = await this.send(`/v1/cam?${query(params)}`, {
      method: 'POST',
      body: imageForm(file),
      signal,
    });
    return response.blob();
  }

  async send(path, init) {
    const key = this.readKey();
    const headers = { ...init.headers, ...(key ? { Authorization: `Bearer ${key}` } : {}) };
    let response;
    try {
      response = await fetch(path, { ...init, headers });
    } catch (error) {
      if (error.name === 'AbortError') throw error;
      throw new ApiError(0, 'unreachable', `The server could not be reached (${error.message}).`);
    }
    if (!response.ok) throw await errorFrom(response);
    return response;
  }
}

/** Whether the request asks for Score-CAM, the method whose masked passes take long. */
function isLong(params) {
  return String(params.method ?? '').split(',').includes('scorecam');
}

/** Resolves after `ms`, or rejects with an AbortError once `signal` aborts. */
function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(new DOMException('The request was aborted.', 'AbortError'));
    }, { once: true });
  });
}

function imageForm(file) {
  const form = new FormData();
  form.append('image', file, file.name || 'image');
  return form;
}

/** A query string from `params`, leaving out empty values. */
function query(params) {
  const entries = Object.entries(params).filter(([, value]) => value !== '' && value != null);
  return new URLSearchParams(entries.map(([name, value]) => [name, String(value)])).toString();
}

async function errorFrom(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy's error page, say): fall back to the status line below.
  }
  const error = body?.error;
  if (error && typeof error.message === 'string') {
    return new ApiError(response.status, String(error.code ?? ''), error.message);
  }
  const line = `HTTP ${response.status} ${response.statusText}`.trim();
  return new ApiError(response.status, 'http_error', line);
}
