package health

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	httpCfg := func(f func(*Config)) func(*Config) {
		return func(c *Config) { c.Kind = KindHTTP; f(c) }
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string // "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"http defaults", httpCfg(func(*Config) {}), ""},
		{"https with host and port", func(c *Config) { c.Kind = KindHTTPS; c.Host = "app.example:8443"; c.Port = 8443 }, ""},
		{"ipv6 host", httpCfg(func(c *Config) { c.Host = "[2001:db8::1]:80" }), ""},
		{"codes list", httpCfg(func(c *Config) { c.ExpectStatus = "200-299, 301,404" }), ""},
		{"path with query", httpCfg(func(c *Config) { c.Path = "/health?deep=1" }), ""},
		{"no jitter", func(c *Config) { c.Jitter = 0 }, ""},
		{"tcp ignores path", func(c *Config) { c.Path = "nope" }, ""},
		{"unknown kind", func(c *Config) { c.Kind = "udp" }, "kind"},
		{"empty kind", func(c *Config) { c.Kind = "" }, "kind"},
		{"port negative", func(c *Config) { c.Port = -1 }, "port"},
		{"port too big", func(c *Config) { c.Port = 65536 }, "port"},
		{"path relative", httpCfg(func(c *Config) { c.Path = "health" }), "path"},
		{"path empty", httpCfg(func(c *Config) { c.Path = "" }), "path"},
		{"path space", httpCfg(func(c *Config) { c.Path = "/a b" }), "path"},
		// A fragment is never sent: the backend got "/health" (found by a probe).
		{"path fragment", httpCfg(func(c *Config) { c.Path = "/health#x" }), "path"},
		{"path empty fragment", httpCfg(func(c *Config) { c.Path = "/health?a=1#" }), "path"},
		{"path escaped hash", httpCfg(func(c *Config) { c.Path = "/health%23x" }), ""},
		{"host slash", httpCfg(func(c *Config) { c.Host = "a/b" }), "host"},
		{"host space", httpCfg(func(c *Config) { c.Host = "a b" }), "host"},
		{"codes empty", httpCfg(func(c *Config) { c.ExpectStatus = "" }), "expect"},
		{"codes reversed", httpCfg(func(c *Config) { c.ExpectStatus = "299-200" }), "expect"},
		{"codes out of range", httpCfg(func(c *Config) { c.ExpectStatus = "200-600" }), "expect"},
		{"codes junk", httpCfg(func(c *Config) { c.ExpectStatus = "2xx" }), "expect"},
		{"interval zero", func(c *Config) { c.Interval = 0 }, "interval"},
		{"interval tiny", func(c *Config) { c.Interval = time.Millisecond }, "interval"},
		{"timeout zero", func(c *Config) { c.Timeout = 0 }, "timeout"},
		{"timeout equals interval", func(c *Config) { c.Timeout = c.Interval }, "timeout"},
		{"rise zero", func(c *Config) { c.Rise = 0 }, "rise"},
		{"fall too big", func(c *Config) { c.Fall = MaxRiseFall + 1 }, "fall"},
		{"jitter negative", func(c *Config) { c.Jitter = -0.1 }, "jitter"},
		{"jitter too big", func(c *Config) { c.Jitter = 0.6 }, "jitter"},
		{"jitter NaN", func(c *Config) { c.Jitter = math.NaN() }, "jitter"},
		{"flap window negative", func(c *Config) { c.FlapWindow = -1 }, "flap_window"},
		{"flap window 1 check", func(c *Config) { c.FlapWindow = 1 }, "flap_window"},
		{"flap window too big", func(c *Config) { c.FlapWindow = MaxFlapWindow + 1 }, "flap_window"},
		{"flap window smallest", func(c *Config) { c.FlapWindow = MinFlapWindow }, ""},
		{"backoff base zero", func(c *Config) { c.BackoffBase = 0 }, "flap_backoff"},
		{"backoff max below base", func(c *Config) { c.BackoffMax = c.BackoffBase / 2 }, "flap_backoff_max"},
		{"backoff max too long", func(c *Config) { c.BackoffMax = 2 * time.Hour }, "flap_backoff_max"},
		{"backoff base negative", func(c *Config) { c.BackoffBase = -10 * time.Second }, "flap_backoff"},
		{"interval too long", func(c *Config) { c.Interval = 2 * time.Hour }, "interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want a *ConfigError wrapping ErrConfig", err)
			}
			if ce.Field != tc.field {
				t.Fatalf("error names field %q (%v), want %q", ce.Field, err, tc.field)
			}
			if strings.Contains(c.Path, "#") && !strings.Contains(ce.Msg, "must not contain '#'") {
				t.Fatalf("error %q does not say why a '#' is refused", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := DefaultConfig()
	want := Config{Kind: "tcp", Path: "/", ExpectStatus: "200-399", Interval: 2 * time.Second, Timeout: time.Second,
		Rise: 2, Fall: 3, Jitter: 0.1, BackoffBase: 10 * time.Second, BackoffMax: 5 * time.Minute, Through: "direct"}
	if c != want {
		t.Fatalf("DefaultConfig = %+v, want %+v", c, want)
	}
	if got := c.EffectiveFlapWindow(); got != 20 {
		t.Fatalf("EffectiveFlapWindow = %v, want the default 20 checks", got)
	}
	c.FlapWindow = 60
	if got := c.EffectiveFlapWindow(); got != 60 {
		t.Fatalf("EffectiveFlapWindow = %v, want the configured 60", got)
	}
}

func TestStatusCodes(t *testing.T) {
	sc, err := ParseStatusCodes(" 200-299 ,301,500-503")
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.String(); got != "200-299,301,500-503" {
		t.Fatalf("String = %q", got)
	}
	for code, want := range map[int]bool{199: false, 200: true, 299: true, 300: false, 301: true, 302: false, 500: true, 503: true, 504: false} {
		if sc.Contains(code) != want {
			t.Errorf("Contains(%d) = %v, want %v", code, !want, want)
		}
	}
	for _, bad := range []string{"", ",", "200-", "-200", "99", "600", "200-100", "abc", "200-299-300"} {
		if _, err := ParseStatusCodes(bad); err == nil {
			t.Errorf("ParseStatusCodes(%q) accepted", bad)
		}
	}
}

// The scheduled delays are a pure function of a uniform random number:
// test the function at its edges and over many draws, not the wall clock.
func TestJitterDelay(t *testing.T) {
	const interval = 2 * time.Second
	for _, jitter := range []float64{0, 0.1, 0.5} {
		lo := time.Duration(float64(interval) * (1 - jitter))
		hi := time.Duration(float64(interval) * (1 + jitter))
		if got := jitterDelay(interval, jitter, 0); got != lo {
			t.Errorf("jitter %v, r=0: %v, want %v", jitter, got, lo)
		}
		if got := jitterDelay(interval, jitter, 0.5); got != interval {
			t.Errorf("jitter %v, r=0.5: %v, want %v", jitter, got, interval)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		var below, above int
		for range 10000 {
			d := jitterDelay(interval, jitter, rng.Float64())
			if d < lo || d > hi {
				t.Fatalf("jitter %v: delay %v outside [%v, %v]", jitter, d, lo, hi)
			}
			if d < interval {
				below++
			} else if d > interval {
				above++
			}
			if f := firstDelay(interval, jitter, rng.Float64()); f < 0 || f > time.Duration(float64(interval)*jitter) {
				t.Fatalf("jitter %v: first delay %v outside [0, %v]", jitter, f, time.Duration(float64(interval)*jitter))
			}
		}
		if jitter > 0 && (below < 4000 || above < 4000) {
			t.Errorf("jitter %v: %d delays below and %d above the interval, want both near half", jitter, below, above)
		}
	}
}
