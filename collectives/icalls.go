package collectives

import (
	"context"

	"github.com/weft-hpc/weft/ddt"
	"github.com/weft-hpc/weft/endpoint"
)

// The nonblocking forms. Each starts the collective of the same name
// without the I, with the same arguments, rules and algorithms, and
// returns a Request to complete with Wait (or poll with Test); see
// Request for how it advances. Argument errors are returned at once.
// The buffers belong to the collective until it has completed.

// bg is the context of the blocking form run as a schedule: its waits
// never block (the Request's Wait takes the caller's context).
var bg = context.Background()

// Ibarrier starts a Barrier.
func Ibarrier(c *Coll) (*Request, error) {
	return c.startNB(callBarrier, true, func(cl *Coll) error { return Barrier(bg, cl) })
}

// Ibcast starts a Bcast.
func Ibcast[T any](c *Coll, buf []T, root int) (*Request, error) {
	return c.startNB(callBcast, hybridRooted(buf), func(cl *Coll) error { return Bcast(bg, cl, buf, root) })
}

// IbcastTyped starts a BcastTyped.
func IbcastTyped(c *Coll, buf []byte, count int, t *ddt.Type, root int) (*Request, error) {
	return c.start(callBcastTyped, func(cl *Coll) error { return BcastTyped(bg, cl, buf, count, t, root) })
}

// Ireduce starts a Reduce.
func Ireduce[T any](c *Coll, send, recv []T, op Op[T], root int) (*Request, error) {
	return c.startNB(callReduce, hybridReduce(c, op.commutative) && hybridRooted(reduceData(send, recv)), func(cl *Coll) error { return Reduce(bg, cl, send, recv, op, root) })
}

// Iallreduce starts an Allreduce.
func Iallreduce[T any](c *Coll, send, recv []T, op Op[T]) (*Request, error) {
	return c.startNB(callAllreduce, hybridReduce(c, op.commutative), func(cl *Coll) error { return Allreduce(bg, cl, send, recv, op) })
}

// IreduceScatterBlock starts a ReduceScatterBlock.
func IreduceScatterBlock[T any](c *Coll, send, recv []T, op Op[T]) (*Request, error) {
	return c.start(callReduceScatterBlock, func(cl *Coll) error { return ReduceScatterBlock(bg, cl, send, recv, op) })
}

// IreduceScatter starts a ReduceScatter.
func IreduceScatter[T any](c *Coll, send, recv []T, counts []int, op Op[T]) (*Request, error) {
	return c.start(callReduceScatter, func(cl *Coll) error { return ReduceScatter(bg, cl, send, recv, counts, op) })
}

// Iscan starts a Scan.
func Iscan[T any](c *Coll, send, recv []T, op Op[T]) (*Request, error) {
	return c.start(callScan, func(cl *Coll) error { return Scan(bg, cl, send, recv, op) })
}

// Iexscan starts an Exscan.
func Iexscan[T any](c *Coll, send, recv []T, op Op[T]) (*Request, error) {
	return c.start(callExscan, func(cl *Coll) error { return Exscan(bg, cl, send, recv, op) })
}

// Igather starts a Gather.
func Igather[T any](c *Coll, send, recv []T, root int) (*Request, error) {
	return c.start(callGather, func(cl *Coll) error { return Gather(bg, cl, send, recv, root) })
}

// Igatherv starts a Gatherv.
func Igatherv[T any](c *Coll, send, recv []T, counts, displs []int, root int) (*Request, error) {
	return c.start(callGatherv, func(cl *Coll) error { return Gatherv(bg, cl, send, recv, counts, displs, root) })
}

// Iscatter starts a Scatter.
func Iscatter[T any](c *Coll, send, recv []T, root int) (*Request, error) {
	return c.start(callScatter, func(cl *Coll) error { return Scatter(bg, cl, send, recv, root) })
}

// Iscatterv starts a Scatterv.
func Iscatterv[T any](c *Coll, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	return c.start(callScatterv, func(cl *Coll) error { return Scatterv(bg, cl, send, counts, displs, recv, root) })
}

// Iallgather starts an Allgather.
func Iallgather[T any](c *Coll, send, recv []T) (*Request, error) {
	return c.start(callAllgather, func(cl *Coll) error { return Allgather(bg, cl, send, recv) })
}

// Iallgatherv starts an Allgatherv.
func Iallgatherv[T any](c *Coll, send, recv []T, counts, displs []int) (*Request, error) {
	return c.start(callAllgatherv, func(cl *Coll) error { return Allgatherv(bg, cl, send, recv, counts, displs) })
}

// Ialltoall starts an Alltoall.
func Ialltoall[T any](c *Coll, send, recv []T) (*Request, error) {
	return c.start(callAlltoall, func(cl *Coll) error { return Alltoall(bg, cl, send, recv) })
}

// Ialltoallv starts an Alltoallv.
func Ialltoallv[T any](c *Coll, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) (*Request, error) {
	return c.start(callAlltoallv, func(cl *Coll) error { return Alltoallv(bg, cl, send, scounts, sdispls, recv, rcounts, rdispls) })
}

// Ialltoallw starts an Alltoallw.
func Ialltoallw(c *Coll, send []byte, scounts, sdispls []int, stypes []*ddt.Type, recv []byte, rcounts, rdispls []int, rtypes []*ddt.Type) (*Request, error) {
	return c.start(callAlltoallw, func(cl *Coll) error {
		return Alltoallw(bg, cl, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes)
	})
}

// IgatherTyped starts a GatherTyped.
func IgatherTyped(c *Coll, send []byte, scount int, stype *ddt.Type, recv []byte, rcount int, rtype *ddt.Type, root int) (*Request, error) {
	return c.start(callGatherTyped, func(cl *Coll) error {
		return GatherTyped(bg, cl, send, scount, stype, recv, rcount, rtype, root)
	})
}

// IscatterTyped starts a ScatterTyped.
func IscatterTyped(c *Coll, send []byte, scount int, stype *ddt.Type, recv []byte, rcount int, rtype *ddt.Type, root int) (*Request, error) {
	return c.start(callScatterTyped, func(cl *Coll) error {
		return ScatterTyped(bg, cl, send, scount, stype, recv, rcount, rtype, root)
	})
}

// IallgatherTyped starts an AllgatherTyped.
func IallgatherTyped(c *Coll, send []byte, scount int, stype *ddt.Type, recv []byte, rcount int, rtype *ddt.Type) (*Request, error) {
	return c.start(callAllgatherTyped, func(cl *Coll) error {
		return AllgatherTyped(bg, cl, send, scount, stype, recv, rcount, rtype)
	})
}

// IalltoallTyped starts an AlltoallTyped.
func IalltoallTyped(c *Coll, send []byte, scount int, stype *ddt.Type, recv []byte, rcount int, rtype *ddt.Type) (*Request, error) {
	return c.start(callAlltoallTyped, func(cl *Coll) error {
		return AlltoallTyped(bg, cl, send, scount, stype, recv, rcount, rtype)
	})
}

// IreduceTyped starts a ReduceTyped.
func IreduceTyped[T any](c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T], root int) (*Request, error) {
	return c.start(callReduceTyped, func(cl *Coll) error { return ReduceTyped(bg, cl, send, recv, count, t, op, root) })
}

// IallreduceTyped starts an AllreduceTyped.
func IallreduceTyped[T any](c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T]) (*Request, error) {
	return c.start(callAllreduceTyped, func(cl *Coll) error { return AllreduceTyped(bg, cl, send, recv, count, t, op) })
}

// IneighborAllgather starts a NeighborAllgather.
func IneighborAllgather[T any](c *Coll, t endpoint.Topology, send, recv []T) (*Request, error) {
	return c.start(callNeighborAllgather, func(cl *Coll) error {
		return NeighborAllgather(bg, cl, t, send, recv)
	})
}

// IneighborAlltoall starts a NeighborAlltoall.
func IneighborAlltoall[T any](c *Coll, t endpoint.Topology, send, recv []T) (*Request, error) {
	return c.start(callNeighborAlltoall, func(cl *Coll) error {
		return NeighborAlltoall(bg, cl, t, send, recv)
	})
}

// IneighborAllgatherv starts a NeighborAllgatherv.
func IneighborAllgatherv[T any](c *Coll, t endpoint.Topology, send, recv []T, rcounts, rdispls []int) (*Request, error) {
	return c.start(callNeighborAllgatherv, func(cl *Coll) error {
		return NeighborAllgatherv(bg, cl, t, send, recv, rcounts, rdispls)
	})
}

// IneighborAlltoallv starts a NeighborAlltoallv.
func IneighborAlltoallv[T any](c *Coll, t endpoint.Topology, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) (*Request, error) {
	return c.start(callNeighborAlltoallv, func(cl *Coll) error {
		return NeighborAlltoallv(bg, cl, t, send, scounts, sdispls, recv, rcounts, rdispls)
	})
}

// IneighborAlltoallw starts a NeighborAlltoallw.
func IneighborAlltoallw(c *Coll, t endpoint.Topology, send []byte, scounts, sdispls []int, stypes []*ddt.Type,
	recv []byte, rcounts, rdispls []int, rtypes []*ddt.Type) (*Request, error) {
	return c.start(callNeighborAlltoallw, func(cl *Coll) error {
		return NeighborAlltoallw(bg, cl, t, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes)
	})
}
