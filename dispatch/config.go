package dispatch

import (
	"fmt"
	"strconv"
	"strings"
)

// LogLevel is how much collmux writes to stderr (COLLMUX_LOG).
type LogLevel int

const (
	LogWarn LogLevel = iota
	LogInfo
	LogDecisions
	LogDebug
)

// StatsMode says whether and how statistics are reported at finalize.
type StatsMode int

const (
	StatsOff StatsMode = iota
	StatsText
	StatsJSON
)

// Config is collmux's configuration, read once per process from the
// environment. Every field has a COLLMUX_* variable; README lists them.
type Config struct {
	Stats     StatsMode
	StatsPath string // "" means stderr (text only)
	Log       LogLevel
	Check     bool   // COLLMUX_CHECK: verify on every call that ranks agree
	NCCLLib   string // COLLMUX_NCCL_LIB: NCCL library to load
	Timeout   int    // COLLMUX_TIMEOUT: seconds before a fused collective is declared hung
	Rules     []Rule // built-in defaults, then COLLMUX_RULES (later wins)
}

// LoadConfig reads the configuration through getenv (os.Getenv in the
// library, a map in tests). A malformed value is an error naming the
// variable, never silently ignored.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	switch v := strings.TrimSpace(getenv("COLLMUX_STATS")); {
	case v == "" || isFalse(v):
	case isTrue(v) || v == "stderr":
		c.Stats = StatsText
	case strings.HasSuffix(v, ".json"):
		c.Stats, c.StatsPath = StatsJSON, v
	default:
		c.Stats, c.StatsPath = StatsText, v
	}
	switch v := strings.TrimSpace(getenv("COLLMUX_LOG")); v {
	case "", "warn":
		c.Log = LogWarn
	case "info":
		c.Log = LogInfo
	case "decisions":
		c.Log = LogDecisions
	case "debug":
		c.Log = LogDebug
	default:
		return c, fmt.Errorf("COLLMUX_LOG=%q: want warn, info, decisions or debug", v)
	}
	c.Check = isTrue(strings.TrimSpace(getenv("COLLMUX_CHECK")))
	c.NCCLLib = getenv("COLLMUX_NCCL_LIB")
	c.Timeout = 300
	if v := strings.TrimSpace(getenv("COLLMUX_TIMEOUT")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1<<30 {
			return c, fmt.Errorf("COLLMUX_TIMEOUT=%q: want a positive number of seconds", v)
		}
		c.Timeout = n
	}
	c.Rules = DefaultRules()
	if v := getenv("COLLMUX_RULES"); v != "" {
		user, err := ParseRules(v, "COLLMUX_RULES")
		if err != nil {
			return c, err
		}
		c.Rules = append(c.Rules, user...)
	}
	return c, nil
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

func isFalse(v string) bool {
	switch strings.ToLower(v) {
	case "0", "false", "no", "off":
		return true
	}
	return false
}
