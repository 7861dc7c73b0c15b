"""The HTTP layer: routes, schemas, uploads, auth and error mapping."""
