// Package redisload drives Floodgate's Redis store with concurrent
// decisions and reads what each Redis master spent on them, for the
// capacity and resharding commands of the bench module.
package redisload

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Client is a go-redis client that counts its round trips: one per command
// or pipeline a node connection sends, redirects included.
type Client struct {
	redis.UniversalClient
	trips atomic.Int64
}

// Dial returns a Client for addrs: a standalone client for one address, a
// Cluster client for several. ContextTimeoutEnabled is on, as docs/REDIS.md
// recommends.
func Dial(addrs []string) *Client {
	c := &Client{}
	if len(addrs) == 1 {
		rdb := redis.NewClient(&redis.Options{Addr: addrs[0], ContextTimeoutEnabled: true, PoolSize: 64})
		rdb.AddHook(tripHook{&c.trips})
		c.UniversalClient = rdb
		return c
	}
	c.UniversalClient = redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, ContextTimeoutEnabled: true, PoolSize: 64,
		NewClient: func(o *redis.Options) *redis.Client {
			rdb := redis.NewClient(o)
			rdb.AddHook(tripHook{&c.trips})
			return rdb
		},
	})
	return c
}

// Trips is the number of round trips sent so far.
func (c *Client) Trips() int64 { return c.trips.Load() }

type tripHook struct{ n *atomic.Int64 }

func (tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// Node is what one Redis master has spent since it started.
type Node struct {
	Addr string
	// CPU is used_cpu_user + used_cpu_sys, in seconds.
	CPU float64
	// Calls counts script and function calls (FCALL, EVALSHA, EVAL).
	Calls int64
	// Commands counts every command the node ran.
	Commands int64
	// Errors counts error replies by their first word (MOVED, ASK, TRYAGAIN, …).
	Errors map[string]int64
}

// Sub returns n − o, field by field.
func (n Node) Sub(o Node) Node {
	d := Node{Addr: n.Addr, CPU: n.CPU - o.CPU, Calls: n.Calls - o.Calls, Commands: n.Commands - o.Commands, Errors: map[string]int64{}}
	for k, v := range n.Errors {
		d.Errors[k] = v - o.Errors[k]
	}
	return d
}

// Masters reads INFO from every master (the one server, when standalone),
// sorted by address.
func Masters(ctx context.Context, c redis.UniversalClient) ([]Node, error) {
	var (
		mu  sync.Mutex
		out []Node
	)
	read := func(ctx context.Context, rdb *redis.Client) error {
		info, err := rdb.Info(ctx, "cpu", "commandstats", "errorstats").Result()
		if err != nil {
			return fmt.Errorf("INFO on %s: %w", rdb.Options().Addr, err)
		}
		n := parseInfo(info)
		n.Addr = rdb.Options().Addr
		mu.Lock()
		out = append(out, n)
		mu.Unlock()
		return nil
	}
	var err error
	switch cc := c.(type) {
	case *redis.ClusterClient:
		err = cc.ForEachMaster(ctx, read) // concurrently, hence the mutex
	case *redis.Client:
		err = read(ctx, cc)
	default:
		err = fmt.Errorf("redisload: unsupported client %T", c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out, err
}

// parseInfo reads the fields Node needs from an INFO reply.
func parseInfo(info string) Node {
	n := Node{Errors: map[string]int64{}}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case name == "used_cpu_user" || name == "used_cpu_sys":
			f, _ := strconv.ParseFloat(val, 64)
			n.CPU += f
		case strings.HasPrefix(name, "cmdstat_"):
			calls := field(val, "calls")
			n.Commands += calls
			switch name {
			case "cmdstat_fcall", "cmdstat_evalsha", "cmdstat_eval":
				n.Calls += calls
			}
		case strings.HasPrefix(name, "errorstat_"):
			n.Errors[strings.TrimPrefix(name, "errorstat_")] = field(val, "count")
		}
	}
	return n
}

// field returns the integer k=… of a "k1=v1,k2=v2" INFO value.
func field(val, k string) int64 {
	for _, kv := range strings.Split(val, ",") {
		if name, v, ok := strings.Cut(kv, "="); ok && name == k {
			i, _ := strconv.ParseInt(v, 10, 64)
			return i
		}
	}
	return 0
}
