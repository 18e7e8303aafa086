package bootstrap

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-hpc/weft/internal/pmi"
)

const (
	abortTimeout    = 5 * time.Second
	finalizeTimeout = 30 * time.Second
)

type pmi1 struct{ c *pmi.Client }

func (p pmi1) put(ctx context.Context, k, v string) error { return p.c.Put(ctx, k, v) }
func (p pmi1) fence(ctx context.Context) error            { return p.c.Barrier(ctx) }
func (p pmi1) get(ctx context.Context, k string) (string, error) {
	return p.c.Get(ctx, k)
}
func (p pmi1) jobInfo(ctx context.Context, k string) (string, error) { return p.c.Get(ctx, k) }
func (p pmi1) abort(ctx context.Context, code int, msg string) error {
	return p.c.Abort(ctx, code, msg)
}
func (p pmi1) finalize(ctx context.Context) error { return p.c.Finalize(ctx) }
func (p pmi1) maxes() (int, int)                  { m := p.c.Maxes(); return m.Key, m.Value }

type pmi2 struct{ c *pmi.Client2 }

func (p pmi2) put(ctx context.Context, k, v string) error { return p.c.Put(ctx, k, v) }
func (p pmi2) fence(ctx context.Context) error            { return p.c.Fence(ctx) }
func (p pmi2) get(ctx context.Context, k string) (string, error) {
	return p.c.Get(ctx, k)
}
func (p pmi2) jobInfo(ctx context.Context, k string) (string, error) { return p.c.JobInfo(ctx, k) }
func (p pmi2) abort(ctx context.Context, code int, msg string) error {
	return p.c.Abort(ctx, code, msg)
}
func (p pmi2) finalize(ctx context.Context) error { return p.c.Finalize(ctx) }
func (p pmi2) maxes() (int, int)                  { return pmi.PMI2MaxKey, pmi.PMI2MaxValue }

// single is the key-value store of a job with one rank and no launcher.
type single struct{ kv map[string]string }

func (s *single) put(_ context.Context, k, v string) error {
	if _, dup := s.kv[k]; dup {
		return fmt.Errorf("%w: duplicate key %q", pmi.ErrRefused, k)
	}
	s.kv[k] = v
	return nil
}
func (s *single) fence(ctx context.Context) error { return ctx.Err() }
func (s *single) get(_ context.Context, k string) (string, error) {
	v, ok := s.kv[k]
	if !ok {
		return "", fmt.Errorf("%w: %s", pmi.ErrNotFound, k)
	}
	return v, nil
}
func (s *single) jobInfo(_ context.Context, k string) (string, error) {
	return "", fmt.Errorf("%w: %s", pmi.ErrNotFound, k)
}
func (s *single) abort(context.Context, int, string) error { return nil }
func (s *single) finalize(context.Context) error           { return nil }
func (s *single) maxes() (int, int)                        { return 64, 1024 }
