"""The REST routes, one :class:`fastapi.APIRouter` per area; :func:`jiyi.server.app.create_app`
includes them. Shared dependencies live in :mod:`jiyi.server.deps`."""
