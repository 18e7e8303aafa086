package collectives

import "github.com/weft-hpc/weft/ddt"

// The nonblocking forms of the typed v-collectives, reduce-scatters and
// scans (see icalls.go).

// IgathervTyped starts a GathervTyped.
func IgathervTyped(c *Coll, send []byte, scount int, stype *ddt.Type, recv []byte, rcounts, displs []int, rtype *ddt.Type, root int) (*Request, error) {
	return c.start(callGathervTyped, func(cl *Coll) error {
		return GathervTyped(bg, cl, send, scount, stype, recv, rcounts, displs, rtype, root)
	})
}

// IscattervTyped starts a ScattervTyped.
func IscattervTyped(c *Coll, send []byte, scounts, displs []int, stype *ddt.Type, recv []byte, rcount int, rtype *ddt.Type, root int) (*Request, error) {
	return c.start(callScattervTyped, func(cl *Coll) error {
		return ScattervTyped(bg, cl, send, scounts, displs, stype, recv, rcount, rtype, root)
	})
}

// IallgathervTyped starts an AllgathervTyped.
func IallgathervTyped(c *Coll, send []byte, scount int, stype *ddt.Type, recv []byte, rcounts, displs []int, rtype *ddt.Type) (*Request, error) {
	return c.start(callAllgathervTyped, func(cl *Coll) error {
		return AllgathervTyped(bg, cl, send, scount, stype, recv, rcounts, displs, rtype)
	})
}

// IalltoallvTyped starts an AlltoallvTyped.
func IalltoallvTyped(c *Coll, send []byte, scounts, sdispls []int, stype *ddt.Type, recv []byte, rcounts, rdispls []int, rtype *ddt.Type) (*Request, error) {
	return c.start(callAlltoallvTyped, func(cl *Coll) error {
		return AlltoallvTyped(bg, cl, send, scounts, sdispls, stype, recv, rcounts, rdispls, rtype)
	})
}

// IreduceScatterTyped starts a ReduceScatterTyped.
func IreduceScatterTyped[T any](c *Coll, send, recv []T, counts []int, t *ddt.Type, op Op[T]) (*Request, error) {
	return c.start(callReduceScatterTyped, func(cl *Coll) error { return ReduceScatterTyped(bg, cl, send, recv, counts, t, op) })
}

// IreduceScatterBlockTyped starts a ReduceScatterBlockTyped.
func IreduceScatterBlockTyped[T any](c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T]) (*Request, error) {
	return c.start(callReduceScatterBlockTyped, func(cl *Coll) error {
		return ReduceScatterBlockTyped(bg, cl, send, recv, count, t, op)
	})
}

// IscanTyped starts a ScanTyped.
func IscanTyped[T any](c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T]) (*Request, error) {
	return c.start(callScanTyped, func(cl *Coll) error { return ScanTyped(bg, cl, send, recv, count, t, op) })
}

// IexscanTyped starts an ExscanTyped.
func IexscanTyped[T any](c *Coll, send, recv []T, count int, t *ddt.Type, op Op[T]) (*Request, error) {
	return c.start(callExscanTyped, func(cl *Coll) error { return ExscanTyped(bg, cl, send, recv, count, t, op) })
}
