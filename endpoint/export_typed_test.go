package endpoint

// SetPipePieceHook has f run after each piece a pipelined node-transport
// typed send has packed (off bytes of n); nil removes it. Set it before
// the first send.
func SetPipePieceHook(f func(off, n int)) { pipePieceHook = f }
