// Package am implements active messages over an endpoint communicator:
// a message names a handler registered on its target rank, and the
// handler runs there, with the message's header and payload, when the
// target polls. It is what a PGAS runtime's remote procedure calls, remote
// enqueues and irregular updates are built on (GASNet's and UCX's active
// messages), next to onesided's puts, gets and atomics for the regular
// ones.
//
// An Engine is opened collectively over a communicator (the world, one
// from Dup or Split, or an endpoint handle of CreateEndpoints) and every
// rank registers the same handlers under the same ids:
//
//	e, err := am.Open(ctx, comm)
//	e.Register(hAdd, func(ctx context.Context, m *am.Msg) error { ... })
//	err = e.Send(ctx, peer, hAdd, header, payload)   // the handler runs on peer
//	out, err := e.Call(ctx, peer, hGet, header, nil, nil) // and replies
//	err = e.Quiesce(ctx) // every message sent anywhere has been handled
//
// # Where handlers run
//
// Handlers run on the goroutine that polls the target's engine: Poll runs
// those of the messages that have arrived, Serve keeps polling until its
// context ends (start it in a goroutine for progress in the background),
// and every blocking call of the engine (Send, Call, Quiesce) polls while
// it waits, so two ranks that call each other never deadlock. One
// goroutine at a time runs handlers: a Poll that finds another goroutine
// polling returns at once. A handler may Send, Call and Reply; given the
// handler's context, a wait inside a handler runs further handlers nested
// in it (up to 16 deep), so ranks that call one another from handlers, in
// a cycle, all make progress. A handler must not keep its Msg, or the
// slices the Msg hands out, after it returns.
//
// On a private endpoint handle the engine, like the handle, is driven by
// one goroutine at a time; on the world communicator and shared handles
// any goroutine may send while another serves.
//
// # Messages
//
// A message whose header and payload fit the inline limit (WithInlineLimit,
// 8 KiB by default) travels as one message of the communicator, copied
// once into the engine's receive buffer. A larger payload follows its
// header as a message of its own: the handler learns its length from
// Msg.Len and receives it straight into memory of its choosing with
// ReadPayload (the endpoint's rendezvous then moves it with one copy, or
// none through libfabric), or takes it with Payload. Messages from one
// rank to another start their handlers in the order they were sent;
// messages to the sending rank itself are queued in process memory. Isend
// starts a send and returns a Request to Wait for or Test.
// WithAggregation packs small messages bound for one rank into batches,
// which leave when full, when the rank polls, or on Flush.
//
// # Termination
//
// Quiesce is collective: it returns once every message any rank sent
// before calling it, and every message handlers sent in turn, has been
// handled. It is the barrier a runtime needs between phases of
// asynchronous updates, and Close calls it before releasing the engine.
package am
