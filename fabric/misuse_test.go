package fabric

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/weft-hpc/weft/internal/misuse"
)

// TestMisuse: every exported method of an endpoint, its CQ and AV, a
// memory region, the domain and the info of an shm pair, called over and
// over with drawn bad arguments, and of nil and zero handles of each kind, (internal/misuse: nil and zero handles,
// negative and huge sizes and counts, nil and empty buffers), returns: no
// panic, no hang. Descriptors and addresses, which go to libfabric as the
// raw values C takes, are drawn among valid ones (and descriptor 0);
// RegisterDevice (a raw device address) and ReadSpin and the WaitWord
// calls (which spin on an empty queue as many rounds as asked) are left
// out.
func TestMisuse(t *testing.T) {
	p := newPair(t, Hints{Provider: "shm", Caps: CapMsg | CapTagged | CapRMA | CapAtomic})
	mr, err := p.dom.Register(make([]byte, 4096), AccessAll)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	for seed := range uint64(20) {
		pr := misuse.New(seed, misuse.Config{
			Skip: []string{"Close", "RegisterDevice", "WaitWord", "WaitWordSignals", "ReadSpin"},
			Special: func(r *rand.Rand, ty reflect.Type) (reflect.Value, bool) {
				switch ty {
				case reflect.TypeFor[Desc]():
					return reflect.ValueOf([]Desc{0, mr.Desc()}[r.IntN(2)]), true
				case reflect.TypeFor[Addr]():
					return reflect.ValueOf(p.a.addr[r.IntN(2)]), true
				}
				return reflect.Value{}, false
			},
			Release: func(v any) {
				if c, ok := v.(interface{ Close() error }); ok {
					c.Close()
				}
			},
		})
		for _, v := range []any{p.a.ep, p.a.cq, p.a.av, mr, p.dom, p.info,
			(*Endpoint)(nil), &Endpoint{}, (*CQ)(nil), &CQ{}, (*AV)(nil), &AV{}, (*Counter)(nil), &Counter{},
			(*Domain)(nil), &Domain{}, (*Fabric)(nil), &Fabric{}, (*MR)(nil), &MR{}} {
			for _, bad := range pr.Methods(v) {
				t.Errorf("seed %d: %s", seed, bad)
			}
		}
	}
}
