package sink

import "context"

type traceKey struct{}

// WithTrace returns a context whose sink calls report their steps to step (the sink has no logger).
func WithTrace(ctx context.Context, step func(string)) context.Context {
	return context.WithValue(ctx, traceKey{}, step)
}

// traceStep reports a step to the context's tracer, if any.
func traceStep(ctx context.Context, step string) {
	if f, ok := ctx.Value(traceKey{}).(func(string)); ok {
		f(step)
	}
}
