package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// How an open got its sandbox (Record.Source).
const (
	SourcePool = "pool" // claimed from a warm pool
	SourceCold = "cold" // created for the open
)

const (
	defaultPoolCreate = 2
	// claimMargin: a warm sandbox this close to the end of its idle time
	// is discarded, never claimed.
	claimMargin = 3 * time.Second
	// claimTries bounds how many warm sandboxes one open tries before it
	// opens cold.
	claimTries = 3
	// refillDelay holds back the refill after a claim that left the pool
	// half full or more: a container create and start take the daemon
	// most of a second of work, and run at once they slow the claimed
	// sandbox's first commands, the very latency the pool is for. A pool
	// below half starts its refill at once.
	refillDelay = 500 * time.Millisecond
)

// PoolConfig keeps warm sandboxes ready for one template, created, decided on
// and checked as a cold open's, with no tenant. An Open of the template spec
// runs every check of a cold open, then claims one: the backend binds it to the
// tenant and session, the lifetime counts from the claim, secrets reach it only
// then, and it never returns to the pool. No usable warm sandbox: a cold open.
type PoolConfig struct {
	// Spec is the JSON of a template spec (sandboxio_template spec).
	Spec       []byte
	SpecSHA256 string // its expected digest, as for Request
	// Size is how many warm sandboxes are kept ready; 0 takes the spec's
	// warm_pool.size.
	Size int
	// MaxIdle is how long a warm sandbox waits for a claim before the
	// backend removes it; 0 takes warm_pool.max_idle_seconds.
	MaxIdle time.Duration
	// MaxCreates bounds the warm sandboxes being created at once; 0 means
	// 2 (never more than Size).
	MaxCreates int
}

// PoolStats describes one warm pool.
type PoolStats struct {
	Template   string
	SpecSHA256 string
	Size       int
	Ready      int // warm sandboxes waiting for a claim
	Creating   int
	Claimed    int // claims that handed a sandbox out
	Discarded  int // warm sandboxes removed unclaimed: idled out, dead, changed, or drained
	Failed     int // creates that failed
	LastError  string
}

type pool struct {
	c          *Client
	b          backends.Backend
	pooler     backends.Pooler
	plan       plan // of the template spec
	size       int
	maxIdle    time.Duration
	maxCreates int

	// ctx bounds the creates; drain lets those in flight land (and removes
	// them) and cancels them only when its own ctx ends first.
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{} // closed by drain: the refill loop ends
	wake   chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	ready    []*warmEntry
	creating int
	closed   bool
	filled   bool // the pool has been full once (announced to Progress)
	failures int  // consecutive, for the backoff
	retryAt  time.Time
	// holdUntil: no refill starts before, after a claim (refillDelay).
	holdUntil time.Time
	stats     PoolStats
}

type warmEntry struct {
	w    backends.Warm
	tier model.Tier
}

// startPools checks every pool's template and starts its refill; nothing is
// created before New returns.
func (c *Client) startPools(ctx context.Context) error {
	c.pools = map[string]*pool{}
	for i, pc := range c.cfg.Pools {
		pl, err := c.newPool(ctx, pc)
		if err != nil {
			_ = c.drainPools(ctx)
			return fmt.Errorf("pool %d: %w", i, err)
		}
		if c.pools[pl.plan.digest] != nil {
			pl.cancel()
			_ = c.drainPools(ctx)
			return &model.Error{Class: model.ErrConfiguration, Attribute: "warm_pool",
				Message: fmt.Sprintf("pool %d repeats the template spec of another pool", i), Fix: "declare one pool per template"}
		}
		c.pools[pl.plan.digest] = pl
	}
	for _, pl := range c.pools {
		pl.wg.Add(1)
		go pl.run()
	}
	return nil
}

// newPool checks a pool's template: a template spec, matching its digest,
// accepted by the policy bundle with the pool's effective size and idle
// time (SBX-WRM-001 refuses a pool on a backend that cannot keep one), on
// a backend of this build that can keep warm sandboxes.
func (c *Client) newPool(ctx context.Context, pc PoolConfig) (*pool, error) {
	spec, err := model.ParseSpec(pc.Spec)
	if err != nil {
		return nil, err
	}
	if err := checkDigest(spec, pc.SpecSHA256); err != nil {
		return nil, err
	}
	if spec.TenantID != "" || spec.SessionID != "" {
		return nil, specError(rules.SpecTenant, "tenant_id", "a warm pool is kept for a template spec; this spec is rendered for a tenant",
			"pass the sandboxio_template spec, not a data.sandboxio_tenant_sandbox spec")
	}
	wp := effectivePool(spec, pc)
	tpl := spec
	tpl.WarmPool = &wp
	if err := c.decideTemplate(ctx, tpl); err != nil {
		return nil, err
	}
	if len(spec.BrokeredSecrets) > 0 {
		// The policy refuses it (SBX-SEC-012); a pool is not started on a
		// decision the bundle should have made.
		return nil, backends.Backstop(spec.Backend, rules.SecBrokerPool, "warm_pool",
			fmt.Sprintf("a warm pool of a template with %d brokered secret(s)", len(spec.BrokeredSecrets)))
	}
	d, err := backends.ParseDSN(spec.Backend)
	if err != nil {
		return nil, err
	}
	if factory(d.Scheme) == nil {
		return nil, notInBuild(d.Scheme)
	}
	p := plan{spec: spec, scheme: d.Scheme, dsn: d}
	if _, p.digest, err = spec.Canonical(); err != nil {
		return nil, err
	}
	if p.callTimeout, p.lifetime, err = model.Durations(spec.TimeoutSeconds, spec.LifetimeSeconds); err != nil {
		return nil, err
	}
	p.createTimeout = p.callTimeout
	b, err := c.backendFor(d)
	if err != nil {
		return nil, err
	}
	// The policy refuses all of these; the pool is not started on a
	// decision it should have made.
	pooler, ok := b.(backends.Pooler)
	sizeMax, idleMin := backends.PoolBounds()
	found := fmt.Sprintf("a warm pool of %d sandboxes idle at most %ds", wp.Size, wp.MaxIdleSeconds)
	switch {
	case !ok:
		return nil, backends.Backstop(d.Scheme, rules.PoolUnsupported, "warm_pool", found)
	case wp.Size < 1 || wp.Size > sizeMax:
		return nil, backends.Backstop(d.Scheme, rules.PoolSize, "warm_pool.size", found)
	case wp.MaxIdleSeconds < max(idleMin, int64(2*claimMargin/time.Second)):
		return nil, backends.Backstop(d.Scheme, rules.PoolIdle, "warm_pool.max_idle_seconds", found)
	}
	maxCreates := pc.MaxCreates
	if maxCreates <= 0 {
		maxCreates = defaultPoolCreate
	}
	size := int(wp.Size)
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pl := &pool{c: c, b: b, pooler: pooler, plan: p, size: size, maxIdle: time.Duration(wp.MaxIdleSeconds) * time.Second,
		maxCreates: min(maxCreates, size), ctx: pctx, cancel: cancel, stop: make(chan struct{}), wake: make(chan struct{}, 1)}
	pl.stats = PoolStats{Template: spec.Name, SpecSHA256: p.digest, Size: size}
	return pl, nil
}

// effectivePool is the pool a PoolConfig asks for: its size and idle time,
// else the spec's warm_pool, else (idle time only) the default.
func effectivePool(spec model.Spec, pc PoolConfig) model.WarmPool {
	wp := model.WarmPool{Size: int64(pc.Size), MaxIdleSeconds: int64((pc.MaxIdle + time.Second - 1) / time.Second)}
	if spec.WarmPool != nil {
		if wp.Size == 0 {
			wp.Size = spec.WarmPool.Size
		}
		if pc.MaxIdle == 0 {
			wp.MaxIdleSeconds = spec.WarmPool.MaxIdleSeconds
		}
	}
	if wp.MaxIdleSeconds == 0 && pc.MaxIdle == 0 {
		wp.MaxIdleSeconds = model.DefaultPoolIdleSeconds
	}
	return wp
}

// decideTemplate runs the policy bundle on the template, as terraform plan
// does on the sandboxio_template; each claim runs the per-tenant decision
// of a cold open as well.
func (c *Client) decideTemplate(ctx context.Context, spec model.Spec) error {
	in, _, err := inputs.Spec(spec)
	if err != nil {
		return err
	}
	in.Kind = policy.KindTemplate
	v, err := verdict.Check(ctx, c.eng, in, verdict.Options{Waivers: c.waivers})
	if err != nil {
		return err
	}
	return v.Err()
}

// run refills the pool: on every claim, every create that ends, and once a
// second to retire warm sandboxes near the end of their idle time.
func (pl *pool) run() {
	defer pl.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		pl.evict()
		pl.fill()
		select {
		case <-pl.stop:
			return
		case <-pl.wake:
		case <-tick.C:
		}
	}
}

func (pl *pool) poke() {
	select {
	case pl.wake <- struct{}{}:
	default:
	}
}

// fill starts creates up to the size, at most maxCreates at once, none
// while a failure's backoff lasts.
func (pl *pool) fill() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if now := time.Now(); now.Before(pl.retryAt) || now.Before(pl.holdUntil) {
		return
	}
	for !pl.closed && len(pl.ready)+pl.creating < pl.size && pl.creating < pl.maxCreates {
		pl.creating++
		pl.wg.Add(1)
		go pl.createOne()
	}
}

// createOne creates one warm sandbox after the live checks of a cold open.
func (pl *pool) createOne() {
	defer pl.wg.Done()
	e, err := pl.newEntry()
	announce := false
	pl.mu.Lock()
	pl.creating--
	closed := pl.closed
	switch {
	case err != nil:
		pl.failures++
		pl.stats.Failed++
		pl.stats.LastError = err.Error()
		pl.retryAt = time.Now().Add(min(100*time.Millisecond<<min(pl.failures, 9), 30*time.Second))
	case !closed:
		pl.failures = 0
		pl.ready = append(pl.ready, e)
		announce = !pl.filled && len(pl.ready) == pl.size
		pl.filled = pl.filled || announce
	}
	pl.mu.Unlock()
	if announce && pl.c.cfg.Progress != nil {
		// Once, when it first gets there: a terminal (and a test) can see
		// that claims are served from now on.
		pl.c.cfg.Progress(fmt.Sprintf("warm pool %s: %d of %d sandboxes ready", pl.plan.spec.Name, pl.size, pl.size))
	}
	if err == nil && closed {
		pl.discard(e)
	}
	pl.poke()
}

func (pl *pool) newEntry() (*warmEntry, error) {
	p := pl.plan
	octx, cancel := context.WithTimeout(pl.ctx, p.createTimeout)
	defer cancel()
	var rec Record
	tier, err := pl.c.liveChecks(pl.ctx, octx, pl.b, p, &rec, func(model.Warning) {})
	if err != nil {
		return nil, err
	}
	w, err := pl.pooler.CreateWarm(octx, backends.WarmRequest{Spec: p.spec, SpecSHA256: p.digest, MaxIdle: pl.maxIdle})
	if err != nil {
		return nil, err
	}
	return &warmEntry{w: w, tier: tier}, nil
}

// evict discards the warm sandboxes too near the end of their idle time.
func (pl *pool) evict() {
	pl.mu.Lock()
	var old []*warmEntry
	keep := pl.ready[:0]
	for _, e := range pl.ready {
		if time.Until(e.w.IdleUntil()) < claimMargin {
			old = append(old, e)
		} else {
			keep = append(keep, e)
		}
	}
	pl.ready = keep
	pl.mu.Unlock()
	for _, e := range old {
		pl.discard(e)
	}
}

// discard removes a warm sandbox in the background, or at once once the
// pool is draining (drain waits for the background ones).
func (pl *pool) discard(e *warmEntry) {
	pl.mu.Lock()
	pl.stats.Discarded++
	closed := pl.closed
	if !closed {
		pl.wg.Add(1)
	}
	pl.mu.Unlock()
	if closed {
		_ = pl.remove(context.Background(), e)
		return
	}
	go func() {
		defer pl.wg.Done()
		_ = pl.remove(context.Background(), e)
	}()
}

// remove discards a warm sandbox. One whose kill the backend cannot confirm
// within the teardown grace is reported as an orphaned sandbox is: audited
// (event orphaned, op discard) and handed to Config.OnWarning, with its id
// and labels, so that it can be found and reaped.
func (pl *pool) remove(ctx context.Context, e *warmEntry) error {
	err := e.w.Discard(ctx)
	var oe *backends.OrphanedError
	if errors.As(err, &oe) {
		r := baseRecord(pl.plan)
		r.Event, r.Op, r.SandboxID, r.Tier = EventOrphaned, "discard", ptr(e.w.ID()), e.tier
		r.Source = SourcePool
		r.Reason = oe.Warning.Message
		r.Warnings = []string{oe.Warning.String()}
		pl.c.audit(r, Secrets{}) // a warm sandbox holds no secret
		pl.c.warn(oe.Warning, Secrets{})
	}
	return err
}

// take hands out the oldest ready warm sandbox that is not near the end of
// its idle time, or nil; the refill starts at once.
func (pl *pool) take() *warmEntry {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for len(pl.ready) > 0 && !pl.closed {
		e := pl.ready[0]
		pl.ready = pl.ready[1:]
		if time.Until(e.w.IdleUntil()) >= claimMargin {
			if 2*len(pl.ready) >= pl.size {
				pl.holdUntil = time.Now().Add(refillDelay)
				time.AfterFunc(refillDelay, pl.poke)
			} else {
				pl.holdUntil = time.Time{}
				pl.poke()
			}
			return e
		}
		pl.stats.Discarded++
		pl.wg.Add(1)
		go func() {
			defer pl.wg.Done()
			_ = pl.remove(context.Background(), e)
		}()
	}
	pl.holdUntil = time.Time{}
	pl.poke()
	return nil
}

// drain stops the refill and removes every warm sandbox, and returns once
// the backend has confirmed them all ended: the ready ones at once, those
// being created as they land (each is waited for). As with Close, the
// removal of what is left of one (a stopped container) may finish after.
// Only when ctx ends first are the creates in flight cancelled; the backend
// then removes what they leave in the background, and drain says the drain
// is incomplete.
func (pl *pool) drain(ctx context.Context) error {
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return nil
	}
	pl.closed = true
	ready := pl.ready
	pl.ready = nil
	pl.stats.Discarded += len(ready)
	pl.mu.Unlock()
	close(pl.stop)
	defer pl.cancel()
	var errs []error
	for _, e := range ready {
		errs = append(errs, pl.remove(ctx, e))
	}
	done := make(chan struct{})
	go func() { pl.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("warm pool %s: drain: %w; the sandboxes still being created are removed in the background", pl.plan.spec.Name, ctx.Err()))
	}
	return errors.Join(errs...)
}

// drainPools drains every pool.
func (c *Client) drainPools(ctx context.Context) error {
	var errs []error
	for _, pl := range c.pools {
		errs = append(errs, pl.drain(ctx))
	}
	return errors.Join(errs...)
}

// PoolStats describes the client's warm pools.
func (c *Client) PoolStats() []PoolStats {
	out := make([]PoolStats, 0, len(c.pools))
	for _, pl := range c.pools {
		pl.mu.Lock()
		st := pl.stats
		st.Ready, st.Creating = len(pl.ready), pl.creating
		pl.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// claim claims a warm sandbox of the plan's template, after every check of
// a cold open has passed; tier is what the live backend gives now. It
// returns nil and no error when the open must go cold: no pool, or no warm
// sandbox that passes the claim's checks. A warm sandbox that fails them is
// removed and audited (event refused, op claim), never handed out.
func (c *Client) claim(ctx context.Context, b backends.Backend, p plan, req Request, tier model.Tier) (*Sandbox, error) {
	pl := c.pools[p.templateDigest]
	if p.templateDigest == "" || pl == nil || pl.b != b {
		return nil, nil
	}
	for range claimTries {
		e := pl.take()
		if e == nil {
			return nil, nil
		}
		s := &Sandbox{c: c, key: key{p.spec.TenantID, p.spec.SessionID}, secrets: req.Secrets, env: maps.Clone(req.Env), plan: p, source: SourcePool}
		if e.tier != tier {
			pl.discard(e)
			continue
		}
		start := time.Now()
		// A pool's template has no brokered secrets (newPool).
		secrets, _ := req.Secrets.split(p.spec)
		created, err := e.w.Claim(ctx, backends.ClaimRequest{Spec: p.spec, SpecSHA256: pl.plan.digest,
			Secrets: secrets, OnWarning: s.onBackendWarning})
		if err != nil {
			pl.mu.Lock()
			pl.stats.Discarded++
			pl.mu.Unlock()
			if me := (*model.Error)(nil); errors.As(err, &me) && me.Rule == rules.OneSandbox {
				// The session is held: a cold open is refused alike.
				return nil, err
			}
			c.auditClaimRefused(p, e, err, req.Secrets)
			continue
		}
		s.claimMS = ptr(ms(time.Since(start)))
		pl.mu.Lock()
		pl.stats.Claimed++
		pl.mu.Unlock()
		if err := c.bind(ctx, s, created, p); err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, nil
}

// auditClaimRefused records a warm sandbox refused at its claim.
func (c *Client) auditClaimRefused(p plan, e *warmEntry, err error, secrets Secrets) {
	r := baseRecord(p)
	r.Event, r.Op, r.SandboxID, r.Tier = EventRefused, "claim", ptr(e.w.ID()), e.tier
	r.Source = SourcePool
	r.Reason = "the warm sandbox failed its claim checks and was removed; the open continues with another or cold"
	setError(&r, classify(err, p.scheme, "claim", secrets))
	c.audit(r, secrets)
}
