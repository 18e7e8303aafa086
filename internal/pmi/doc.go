// Package pmi speaks the process-management wire protocols that MPI-style
// launchers use to hand a parallel job its rank, size and a shared key-value
// space.
//
// Two protocols are implemented:
//
//   - PMI-1 "simple": newline-terminated lines of space-separated key=value
//     pairs (cmd=init, get_maxes, get_appnum, get_universe_size,
//     get_my_kvsname, put, barrier_in/barrier_out, get, finalize, abort).
//     Client spoken to MPICH Hydra (mpiexec.hydra) and to weft's own Server,
//     which fabrun runs. A client finds its launcher either through an
//     inherited socket (PMI_FD, PMI_RANK, PMI_SIZE) or a TCP address
//     (PMI_PORT=host:port plus PMI_ID), in which case the client first sends
//     cmd=initack and receives its rank and size.
//   - PMI-2: a 6-character decimal length prefix followed by
//     "cmd=NAME;key=value;..." where a literal ';' inside a value is written
//     ";;". Client only (fullinit, info-getjobattr, kvs-put, kvs-fence, kvs-get,
//     finalize, abort), as served by Slurm's "srun --mpi=pmi2".
//
// Values on the wire are text with no spaces, newlines or ';'; callers that
// carry binary data encode it first (internal/bootstrap does, and splits values
// longer than the launcher's vallen_max across several keys).
//
// weft's Server extends the PMI_PORT handshake with a job secret: a client
// launched by fabrun finds it in WEFT_PMI_SECRET and adds secret=... to its
// cmd=initack line; the server drops every connection that does not present it.
// Until a connection has authenticated it may send one line of at most 512
// bytes within ServerConfig.HandshakeTimeout, and at most
// ServerConfig.MaxPending such connections are served at once. A rank id is
// claimed by its first authenticated connection only.
//
// Every call that waits on the network takes a context.Context; cancelling it
// (or its deadline passing) interrupts the read or write with an error that
// wraps ctx.Err(). Malformed input produces an error wrapping ErrProtocol, never
// a panic or a hang.
package pmi
