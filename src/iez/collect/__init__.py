"""Statistics collection (docs/references.md#s000-collect): collectors on the OSSs and the MDS
read Lustre's parameters and host load every interval and publish one signed message to the controller
over ZeroMQ. `collectors` (what is read, one table of them), `message` (the wire format), `publisher`
(the process)."""
