"""IO-Cop: access control for a shared file system (docs/references.md#s004-controller; docs/iocop.md).

An application asks the access controller for a token before an I/O phase and gives it back
after; a policy decides who holds tokens at once. Modules:

- `protocol`: the wire format (text lines), shared by the controller, the Python client and C;
- `admission`: the pure policies (exclusive, k-concurrent, fair-share, priority, ost-aware) and
  the wait estimate;
- `lane`: waiting claims in order with exact sums of their expected holds (the estimate kept as
  claims come and go);
- `queue`: the pure queue and lease state machine behind the protocol (`AccessQueue`);
- `statefile`: the controller's state in SQLite (tables and migrations on db/), so a restart
  keeps who holds and who waits;
- `server`: `iez access serve`, the controller behind ZeroMQ ROUTER and a raw-TCP line socket;
- `token_client`: the Python client (`io_begin`/`io_end`, IEZ_ACCESS modes);
- `ostset`: the OST sets of applications, from plans, placements or file layouts;
- `tbf`: Lustre NRS TBF rules rendered from the controller's decisions;
- `job`, `evaluation`: seed 004's experiments (docs/references.md#s004-fig8) on the emulated
  cluster and in the simulator.
"""
