"""Network front ends for jiyi.

``jiyi.server.app`` is the REST service (FastAPI), ``jiyi.server.run`` starts it under
uvicorn and ``jiyi.server.auth`` manages its API keys. Nothing is imported here, so the
optional web dependencies are only needed by whoever uses them.
"""
