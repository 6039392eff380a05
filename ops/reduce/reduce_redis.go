package reduce

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisReductions is a ReductionStore in one Redis hash, shared by every
// replica: field = policy name, value = JSON {"factor", "until_ms",
// "reason"}. Times come from the Redis server's clock, so replicas with
// skewed clocks still end a reduction together. Entries expire by
// themselves: readers ignore fields past until_ms, every write drops them,
// and the hash key carries a PEXPIREAT at its latest end, so Redis deletes
// it when the last reduction ends (this works on Redis before 7.4, which
// lacks per-field expiry).
type RedisReductions struct {
	client redis.UniversalClient
	key    string
	now    func() time.Time
}

// NewRedisReductions returns a store in the hash prefix+"reductions"
// (prefix as the rate-limit store's, e.g. "fg:").
func NewRedisReductions(client redis.UniversalClient, prefix string) *RedisReductions {
	return &RedisReductions{client: client, key: prefix + "reductions", now: time.Now}
}

// Key returns the name of the hash.
func (s *RedisReductions) Key() string { return s.key }

// putScript: KEYS[1] hash; ARGV: policy, factor, duration ms, reason.
// Returns the end in Unix ms by the server's clock.
var putScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local untilms = now + tonumber(ARGV[3])
-- Formatted by hand: cjson would print until_ms with 14 significant digits.
redis.call('HSET', KEYS[1], ARGV[1], string.format('{"factor":%.17g,"until_ms":%d,"reason":%s}', tonumber(ARGV[2]), untilms, cjson.encode(ARGV[4])))
local latest = 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local ok, v = pcall(cjson.decode, all[i + 1])
  local u = ok and type(v) == 'table' and tonumber(v.until_ms) or 0
  if u <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif u > latest then
    latest = u
  end
end
redis.call('PEXPIREAT', KEYS[1], latest)
return untilms
`)

// listScript returns the server time (s, µs) and the hash's fields and
// values.
var listScript = redis.NewScript(`
local t = redis.call('TIME')
local out = {t[1], t[2]}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all do out[#out + 1] = all[i] end
return out
`)

type redisReduction struct {
	Factor  float64 `json:"factor"`
	UntilMS int64   `json:"until_ms"`
	Reason  string  `json:"reason"`
}

// Put implements ReductionStore.
func (s *RedisReductions) Put(ctx context.Context, policy string, factor float64, d time.Duration, reason string) (Reduction, error) {
	local := s.now()
	// The script returns the end by the server's clock; locally the
	// reduction lasts d from now, which List's conversion agrees with.
	if err := putScript.Run(ctx, s.client, []string{s.key}, policy, factor, d.Milliseconds(), reason).Err(); err != nil {
		return Reduction{}, err
	}
	return Reduction{Policy: policy, Factor: factor, Until: local.Add(d), Reason: reason}, nil
}

// Delete implements ReductionStore.
func (s *RedisReductions) Delete(ctx context.Context, policy string) error {
	return s.client.HDel(ctx, s.key, policy).Err()
}

// List implements ReductionStore. Each end is converted from the server's
// clock to the local one by the time left, so clock skew between replicas
// does not move it.
func (s *RedisReductions) List(ctx context.Context) ([]Reduction, error) {
	vals, err := listScript.Run(ctx, s.client, []string{s.key}).StringSlice()
	if err != nil {
		return nil, err
	}
	local := s.now()
	if len(vals) < 2 {
		return nil, fmt.Errorf("reduce: reductions: short reply from Redis")
	}
	var sec, usec int64
	fmt.Sscan(vals[0], &sec)
	fmt.Sscan(vals[1], &usec)
	serverMS := sec*1000 + usec/1000
	var out []Reduction
	for i := 2; i+1 < len(vals); i += 2 {
		var v redisReduction
		if err := json.Unmarshal([]byte(vals[i+1]), &v); err != nil {
			continue // written by something else; not ours to interpret
		}
		left := time.Duration(v.UntilMS-serverMS) * time.Millisecond
		if left <= 0 || !(v.Factor > 0 && v.Factor < 1) {
			continue
		}
		out = append(out, Reduction{Policy: vals[i], Factor: v.Factor, Until: local.Add(left), Reason: v.Reason})
	}
	return out, nil
}
