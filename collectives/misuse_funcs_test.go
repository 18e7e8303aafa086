package collectives_test

import (
	"math/rand/v2"
	"reflect"
	"time"

	C "github.com/weft-hpc/weft/collectives"
)

// collectiveFuncs are the package's collectives, the generic ones for
// float64, for TestMisuse.
func collectiveFuncs() map[string]any {
	return map[string]any{
		"AllgatherInit":            C.AllgatherInit[float64],
		"AllgatherTyped":           C.AllgatherTyped,
		"Allgather":                C.Allgather[float64],
		"AllgathervTyped":          C.AllgathervTyped,
		"Allgatherv":               C.Allgatherv[float64],
		"AllreduceInit":            C.AllreduceInit[float64],
		"AllreduceTyped":           C.AllreduceTyped[float64],
		"Allreduce":                C.Allreduce[float64],
		"AlltoallInit":             C.AlltoallInit[float64],
		"AlltoallTyped":            C.AlltoallTyped,
		"Alltoall":                 C.Alltoall[float64],
		"AlltoallvTyped":           C.AlltoallvTyped,
		"Alltoallv":                C.Alltoallv[float64],
		"Alltoallw":                C.Alltoallw,
		"Barrier":                  C.Barrier,
		"BarrierInit":              C.BarrierInit,
		"BcastInit":                C.BcastInit[float64],
		"BcastTyped":               C.BcastTyped,
		"Bcast":                    C.Bcast[float64],
		"ExscanTyped":              C.ExscanTyped[float64],
		"Exscan":                   C.Exscan[float64],
		"GatherInit":               C.GatherInit[float64],
		"GatherTyped":              C.GatherTyped,
		"Gather":                   C.Gather[float64],
		"GathervTyped":             C.GathervTyped,
		"Gatherv":                  C.Gatherv[float64],
		"IallgatherTyped":          C.IallgatherTyped,
		"Iallgather":               C.Iallgather[float64],
		"IallgathervTyped":         C.IallgathervTyped,
		"Iallgatherv":              C.Iallgatherv[float64],
		"IallreduceTyped":          C.IallreduceTyped[float64],
		"Iallreduce":               C.Iallreduce[float64],
		"IalltoallTyped":           C.IalltoallTyped,
		"Ialltoall":                C.Ialltoall[float64],
		"IalltoallvTyped":          C.IalltoallvTyped,
		"Ialltoallv":               C.Ialltoallv[float64],
		"Ialltoallw":               C.Ialltoallw,
		"Ibarrier":                 C.Ibarrier,
		"IbcastTyped":              C.IbcastTyped,
		"Ibcast":                   C.Ibcast[float64],
		"IexscanTyped":             C.IexscanTyped[float64],
		"Iexscan":                  C.Iexscan[float64],
		"IgatherTyped":             C.IgatherTyped,
		"Igather":                  C.Igather[float64],
		"IgathervTyped":            C.IgathervTyped,
		"Igatherv":                 C.Igatherv[float64],
		"IneighborAllgather":       C.IneighborAllgather[float64],
		"IneighborAllgatherv":      C.IneighborAllgatherv[float64],
		"IneighborAlltoall":        C.IneighborAlltoall[float64],
		"IneighborAlltoallv":       C.IneighborAlltoallv[float64],
		"IneighborAlltoallw":       C.IneighborAlltoallw,
		"IreduceScatterBlockTyped": C.IreduceScatterBlockTyped[float64],
		"IreduceScatterBlock":      C.IreduceScatterBlock[float64],
		"IreduceScatterTyped":      C.IreduceScatterTyped[float64],
		"IreduceScatter":           C.IreduceScatter[float64],
		"IreduceTyped":             C.IreduceTyped[float64],
		"Ireduce":                  C.Ireduce[float64],
		"IscanTyped":               C.IscanTyped[float64],
		"Iscan":                    C.Iscan[float64],
		"IscatterTyped":            C.IscatterTyped,
		"Iscatter":                 C.Iscatter[float64],
		"IscattervTyped":           C.IscattervTyped,
		"Iscatterv":                C.Iscatterv[float64],
		"NeighborAllgather":        C.NeighborAllgather[float64],
		"NeighborAllgatherv":       C.NeighborAllgatherv[float64],
		"NeighborAlltoallInit":     C.NeighborAlltoallInit[float64],
		"NeighborAlltoall":         C.NeighborAlltoall[float64],
		"NeighborAlltoallv":        C.NeighborAlltoallv[float64],
		"NeighborAlltoallw":        C.NeighborAlltoallw,
		"NeighborAlltoallwInit":    C.NeighborAlltoallwInit,
		"ReduceInit":               C.ReduceInit[float64],
		"ReduceScatterBlockInit":   C.ReduceScatterBlockInit[float64],
		"ReduceScatterBlockTyped":  C.ReduceScatterBlockTyped[float64],
		"ReduceScatterBlock":       C.ReduceScatterBlock[float64],
		"ReduceScatterTyped":       C.ReduceScatterTyped[float64],
		"ReduceScatter":            C.ReduceScatter[float64],
		"ReduceTyped":              C.ReduceTyped[float64],
		"Reduce":                   C.Reduce[float64],
		"ScanInit":                 C.ScanInit[float64],
		"ScanTyped":                C.ScanTyped[float64],
		"Scan":                     C.Scan[float64],
		"ScatterInit":              C.ScatterInit[float64],
		"ScatterTyped":             C.ScatterTyped,
		"Scatter":                  C.Scatter[float64],
		"ScattervTyped":            C.ScattervTyped,
		"Scatterv":                 C.Scatterv[float64],
	}
}

// misuseColl draws c most of the time for a *C.Coll parameter (nil and a
// zero one otherwise), built-in operations and a zero one for Op[float64],
// and mostly buffers of 16 elements for []float64.
func misuseColl(c *C.Coll) func(r *rand.Rand, t reflect.Type) (reflect.Value, bool) {
	ops := []C.Op[float64]{C.Sum[float64](), C.Max[float64](), {}}
	return func(r *rand.Rand, t reflect.Type) (reflect.Value, bool) {
		switch t {
		case reflect.TypeFor[*C.Coll]():
			return reflect.ValueOf([]*C.Coll{c, c, c, nil, {}}[r.IntN(5)]), true
		case reflect.TypeFor[C.Op[float64]]():
			return reflect.ValueOf(ops[r.IntN(len(ops))]), true
		case reflect.TypeFor[time.Duration]():
			return reflect.ValueOf(time.Millisecond), true
		case reflect.TypeFor[[]float64]():
			if r.IntN(4) != 0 { // a buffer every size here accepts, so calls get to wait
				return reflect.ValueOf(make([]float64, 16)), true
			}
		}
		return reflect.Value{}, false
	}
}
