"""Statistics collection (seed 000 §III-B1): collectors on the OSSs and the MDS read Lustre's
parameters and host load every interval and publish one signed message to the controller over
ZeroMQ. `collectors` (what is read), `message` (the wire format), `publisher` (the process)."""
