// Package devhook lets the packages that keep libfabric registrations or
// mappings of a gpu.Device's memory (endpoint, onesided) run a hook when
// the device is closed, before its memory is freed. Package gpu sets
// OnClose; it lives here, outside gpu's exported API, so that no internal
// mechanism shows in gpu's signatures.
package devhook

// OnClose registers fn to run when device d (a *gpu.Device) is closed,
// before Close frees the device's memory, and returns a function that
// removes the hook again. It returns ok false, and registers nothing, when
// d is closed or closing already. fn runs without any of the device's
// locks held, on the goroutine that called Close; it must not call Close.
// Set by package gpu's init.
var OnClose func(d any, fn func()) (remove func(), ok bool)
