"""The controller (docs/references.md#s000-collect, #s000-alg2): subscribes to the collectors, keeps the global view of
OST and OSS statistics, predicts and allocates when requests arrive, and serves plans over HTTP.
`view` (global view), `service` (the work), `api` (HTTP), `server` (the process), `work` (what is left to do, from the database),
`exposition` (/metrics), `api_client` (the Python client of the API)."""
