"""Network front ends for jiyi.

``jiyi.server.app`` builds the REST service (FastAPI) from the routers in
``jiyi.server.routes`` and the shared dependencies in ``jiyi.server.deps``;
``jiyi.server.run`` starts it under uvicorn, ``jiyi.server.mcp`` is the MCP server,
``jiyi.server.storage`` opens the store both serve, and ``jiyi.server.auth`` manages
the API keys. Nothing is imported here, so the optional web dependencies are only
needed by whoever uses them.
"""
