package dispatch

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"collmux/topo/nvlink"
	"collmux/tune"
)

// LogLevel is how much collmux writes to stderr (COLLMUX_LOG), in the
// order COLLMUX_LOG names them.
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
// environment. Every field has a COLLMUX_* variable; Vars lists them.
type Config struct {
	Stats      StatsMode
	StatsPath  string // "" means stderr (text only)
	Trace      string // COLLMUX_TRACE: each rank's timeline goes to Trace.<rank>.json ("": none)
	Log        LogLevel
	Check      bool            // COLLMUX_CHECK: verify on every call that ranks agree
	Overlap    bool            // COLLMUX_OVERLAP: every communicator's device collectives run beside computation
	NCCLLib    string          // COLLMUX_NCCL_LIB: NCCL library to load
	NVRTCLib   string          // COLLMUX_NVRTC_LIB: NVRTC library to load ("": the usual names)
	TopoNodes  int             // COLLMUX_TOPO_OVERRIDE: nodes each communicator's ranks pretend to sit on (tests)
	Timeout    int             // COLLMUX_TIMEOUT: seconds before a fused collective is declared hung
	LingerUS   int             // COLLMUX_FUSED_LINGER: idle microseconds before the resident fused kernel stops
	Unordered  bool            // COLLMUX_STREAM_ORDER=none: device buffers are ready when a call is made
	FusedAlgo  FusedAlgo       // COLLMUX_FUSED_ALGO: how the fused kernels all-reduce
	OpsAlgo    int             // COLLMUX_OPS_ALGO: 0 auto, 1 fused, 2 cublas, 3 nccl (its values' order; fused/ops.c's forms)
	Ops        []tune.OpsRange // the tuning table's forms of the fused operations, which auto takes
	Rules      []Rule          // built-in defaults, a tuning table, then COLLMUX_RULES (later wins)
	UserFrom   int             // Rules[:UserFrom] are the defaults and tuning table, the rest COLLMUX_RULES
	Tuning     string          // the tuning table in force, if any
	TuningFrom string          // where Tuning came from: TuningFromEnv, TuningFromUser or TuningFromSystem (with " (COLLMUX_TUNING_DIR)")
	Warnings   []string
}

// FusedAlgo is how the fused kernels all-reduce (COLLMUX_FUSED_ALGO).
// Its values are in the order COLLMUX_FUSED_ALGO names them.
type FusedAlgo int

const (
	// AlgoAuto: the LL protocol up to 256 KiB (sizes a multiple of 8
	// bytes; all-gather and all-to-all too), then one shot on two ranks
	// and two shots on more. A forced algorithm sends the all-gather and
	// all-to-all through the slots as well.
	AlgoAuto FusedAlgo = iota
	// AlgoOneShot: every rank reads every peer's whole message.
	AlgoOneShot
	// AlgoTwoShot: reduce-scatter, then all-gather, each rank reducing
	// its share.
	AlgoTwoShot
)

// DefaultLingerUS is how long the resident fused kernel waits for the next
// job before it stops. Calls closer together than this skip the kernel
// launch; the price is that the program's cudaDeviceSynchronize waits up to
// this long after a fused call, and that the kernel's blocks stay on the
// GPU meanwhile.
const DefaultLingerUS = 200

// RulesHash identifies the rule set, so that ranks can check that they
// route alike (a rank routing differently would hang a collective).
func (c Config) RulesHash() uint32 { return RulesHash(c.Rules) }

// RulesHash identifies a rule list by its texts, in order.
func RulesHash(rules []Rule) uint32 {
	h := fnv.New32a()
	for _, r := range rules {
		fmt.Fprintf(h, "%s|", r.Text)
	}
	return h.Sum32()
}

// GPUKey computes this machine's GPU key (nvlink.Node.Key) for matching
// tuning tables; the library and the collmux tool each set it with their
// own way of asking NVML. Unset, the machine counts as having no GPU.
var GPUKey func() string

func gpuKey() string {
	if GPUKey == nil {
		return nvlink.Read(nil).Key()
	}
	return GPUKey()
}

// TuningDir is the user's folder of tuning tables, one per GPU key, where
// `collmux tune --install` puts them (searched before SystemTuningDir):
// $XDG_CONFIG_HOME/collmux, or ~/.config/collmux; "" (none) where neither
// variable holds an absolute path, which would otherwise take tables from
// .config/collmux under whatever directory the program runs in.
func TuningDir(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "collmux")
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".config", "collmux")
	}
	return ""
}

// DefaultSystemTuningDir is the site-wide folder of tuning tables (`collmux
// tune --install --system`), searched after the user's; COLLMUX_TUNING_DIR
// names another.
const DefaultSystemTuningDir = "/etc/collmux"

// systemTuningDefault is DefaultSystemTuningDir; tests point it elsewhere,
// away from whatever this machine's /etc/collmux holds.
var systemTuningDefault = DefaultSystemTuningDir

// SystemTuningDir is the site-wide folder of tuning tables:
// COLLMUX_TUNING_DIR, which must be an absolute path, or /etc/collmux.
func SystemTuningDir(getenv func(string) string) (string, error) {
	v := getenv("COLLMUX_TUNING_DIR")
	if v == "" {
		return systemTuningDefault, nil
	}
	if !filepath.IsAbs(v) {
		return "", fmt.Errorf("COLLMUX_TUNING_DIR=%q: want an absolute path", v)
	}
	return filepath.Clean(v), nil
}

// TuningDirs are the folders searched for an installed tuning table, in
// order: the user's (TuningDir, where there is one), then the system's.
func TuningDirs(getenv func(string) string) []string {
	var dirs []string
	if d := TuningDir(getenv); d != "" {
		dirs = append(dirs, d)
	}
	if d, err := SystemTuningDir(getenv); err == nil {
		dirs = append(dirs, d)
	}
	return dirs
}

// Where a tuning table came from (Config.TuningFrom).
const (
	TuningFromEnv    = "COLLMUX_TUNING"
	TuningFromUser   = "the user's folder"
	TuningFromSystem = "the system folder"
)

// tuningRules loads the tuning table named by COLLMUX_TUNING, or the one
// installed for this machine's GPU key: in the user's folder, else in the
// system folder, whose table is read only if no other user could have
// written it (TrustedSystemPath; else it is skipped with a warning). A table
// made on another machine is refused with a warning; an unreadable or
// malformed one is an error. from says where the table came from.
func tuningRules(getenv func(string) string) (rules []Rule, ops []tune.OpsRange, path, from, warn string, err error) {
	sys, err := SystemTuningDir(getenv)
	if err != nil {
		return nil, nil, "", "", "", err
	}
	var t tune.Table
	if path = getenv("COLLMUX_TUNING"); path != "" {
		from = TuningFromEnv
		if t, err = tune.Read(path); err != nil {
			return nil, nil, "", "", "", fmt.Errorf("COLLMUX_TUNING: %v", err)
		}
	} else {
		user := TuningDir(getenv)
		installed := false
		for _, dir := range []string{user, sys} {
			if dir == "" {
				continue
			}
			if m, _ := filepath.Glob(filepath.Join(dir, "tuning-*.json")); len(m) > 0 {
				installed = true
			}
		}
		if !installed {
			return nil, nil, "", "", "", nil // nothing installed: skip NVML entirely
		}
		name := "tuning-" + gpuKey() + ".json"
		if path = filepath.Join(user, name); user != "" && exists(path) {
			from = TuningFromUser
			if t, err = tune.Read(path); err != nil {
				return nil, nil, "", "", "", fmt.Errorf("the installed tuning table: %v", err)
			}
		} else {
			path, from = filepath.Join(sys, name), TuningFromSystem
			if getenv("COLLMUX_TUNING_DIR") != "" {
				from += " (COLLMUX_TUNING_DIR)"
			}
			b, err := readTrusted(path)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil, nil, "", "", "", nil
			case err != nil:
				return nil, nil, "", "", fmt.Sprintf("system tuning table %s not used: %v", path, err), nil
			}
			if t, err = tune.Decode(b, path); err != nil {
				return nil, nil, "", "", "", fmt.Errorf("the system tuning table: %v", err)
			}
		}
	}
	if key := gpuKey(); t.GPUKey != key {
		return nil, nil, "", "", fmt.Sprintf("tuning table %s was measured on another machine (GPU key %s, this one %s): not used", path, t.GPUKey, key), nil
	}
	rules, err = ParseRules(t.RuleString(), "tuning table "+path)
	// A table's rules were measured with each collective alone on the GPU:
	// those that do not say overlap=yes hold outside overlap mode only, so
	// that beside computation the defaults' (or the table's own overlap=yes
	// rules) still choose.
	for i := range rules {
		if rules[i].Cond.Overlaps == 0 {
			rules[i].Cond.Overlaps = 1 << Alone
			rules[i].Text += ":overlap=no" // as collmux info and routes show it
		}
	}
	if err == nil {
		err = CheckOps("tuning table "+path, t.Ops)
	}
	return rules, t.Ops, path, from, "", err
}

// MaxOpsRanges is how many forms of the fused operations a tuning table
// may hold (the library's table of them, cmx_config.ops_tuned).
const MaxOpsRanges = 64

// CheckOps checks a tuning table's forms of the fused operations (what
// names the table in errors): at most MaxOpsRanges, each a form
// COLLMUX_OPS_ALGO names, for ranks from 1 and batches from 1 to
// tune.MaxOpsBatch. collmux tune checks what it writes as the library
// checks what it reads.
func CheckOps(what string, ops []tune.OpsRange) error {
	if len(ops) > MaxOpsRanges {
		return fmt.Errorf("%s: %d forms of the fused operations, at most %d", what, len(ops), MaxOpsRanges)
	}
	for _, r := range ops {
		if r.Op != "gemv_allreduce" || !slices.Contains(tune.OpsForms, r.Form) || r.Ranks < 1 || r.BatchLo < 1 || r.BatchHi < r.BatchLo ||
			r.BatchHi > tune.MaxOpsBatch || r.Hi < r.Lo {
			return fmt.Errorf("%s: bad form of a fused operation %+v (want op gemv_allreduce, form %s, ranks from 1, batches 1 to %d)",
				what, r, strings.Join(tune.OpsForms, ", "), tune.MaxOpsBatch)
		}
	}
	return nil
}

// OpsHash identifies the forms of the fused operations in force, so that
// the ranks of a communicator can check that they pick alike.
func (c Config) OpsHash() uint32 {
	h := fnv.New32a()
	for _, r := range c.Ops {
		fmt.Fprintf(h, "%+v|", r)
	}
	return h.Sum32()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readTrusted reads a system tuning table after checking (TrustedSystemPath)
// its folder and itself, the file opened without following a link and
// checked again once open, so that it cannot be swapped in between.
func readTrusted(path string) ([]byte, error) {
	if _, err := os.Lstat(path); err != nil {
		return nil, err // none installed for this key: no word about the folder
	}
	if err := TrustedSystemPath(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if err := TrustedSystemPath(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := trusted(path, fi, false); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// TrustedSystemPath says why a system tuning table, or its folder, is not
// to be trusted (nil if it is): it is a symbolic link (checked with Lstat,
// never followed), not a regular file or folder, owned by a user other than
// root and the current one, or writable by its group or others. Such a
// table could have been written by another user to route everyone's
// collectives.
func TrustedSystemPath(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	return trusted(path, fi, fi.IsDir())
}

func trusted(path string, fi fs.FileInfo, dir bool) error {
	what := "file"
	if dir {
		what = "folder"
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link", path)
	case dir && !fi.IsDir() || !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular %s", path, what)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s %s is writable by its group or others (mode %04o)", what, path, fi.Mode().Perm())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("cannot tell who owns %s", path)
	}
	if st.Uid != 0 && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s %s is owned by uid %d, neither root nor this user", what, path, st.Uid)
	}
	return nil
}

// LoadConfig reads the configuration through getenv (os.Getenv in the
// library, a map in tests). A malformed value is an error naming the
// variable, never silently ignored.
func LoadConfig(getenv func(string) string) (Config, error) {
	var c Config
	// Only what looks like a path is a file: any other word (stdout, a
	// misspelt boolean) would otherwise become a file in the current
	// directory, found by no one.
	switch v := strings.TrimSpace(getenv("COLLMUX_STATS")); {
	case v == "" || isFalse(v):
	case isTrue(v) || strings.EqualFold(v, "stderr") || v == "-":
		c.Stats = StatsText
	case strings.HasSuffix(v, ".json"):
		c.Stats, c.StatsPath = StatsJSON, v
	case strings.Contains(v, "/") || strings.HasSuffix(v, ".txt"):
		c.Stats, c.StatsPath = StatsText, v
	default:
		return c, fmt.Errorf("COLLMUX_STATS=%q: want 1/0 (or true/false, yes/no, on/off), stderr or -, or a file: a path containing '/' or ending in .json (JSON) or .txt (text)", v)
	}
	if v := strings.TrimSpace(getenv("COLLMUX_TRACE")); v != "" && !isFalse(v) {
		if isTrue(v) {
			return c, fmt.Errorf("COLLMUX_TRACE=%q: want a path; each rank writes <path>.<rank>.json", v)
		}
		c.Trace = v
	}
	log, err := choiceVar(getenv, "COLLMUX_LOG")
	if err != nil {
		return c, err
	}
	c.Log = LogLevel(log)
	if c.Overlap, err = boolVar(getenv, "COLLMUX_OVERLAP"); err != nil {
		return c, err
	}
	if c.Check, err = boolVar(getenv, "COLLMUX_CHECK"); err != nil {
		return c, err
	}
	c.NCCLLib, c.NVRTCLib = getenv("COLLMUX_NCCL_LIB"), getenv("COLLMUX_NVRTC_LIB")
	if c.TopoNodes, err = intVar(getenv, "COLLMUX_TOPO_OVERRIDE", 1, 1, 1<<20, "a positive number of nodes"); err != nil {
		return c, err
	}
	if c.Timeout, err = intVar(getenv, "COLLMUX_TIMEOUT", DefaultTimeout, 1, 1<<30, "a positive number of seconds"); err != nil {
		return c, err
	}
	order, err := choiceVar(getenv, "COLLMUX_STREAM_ORDER")
	if err != nil {
		return c, err
	}
	c.Unordered = order == 1
	algo, err := choiceVar(getenv, "COLLMUX_FUSED_ALGO")
	if err != nil {
		return c, err
	}
	c.FusedAlgo = FusedAlgo(algo)
	if c.OpsAlgo, err = choiceVar(getenv, "COLLMUX_OPS_ALGO"); err != nil {
		return c, err
	}
	if c.LingerUS, err = intVar(getenv, "COLLMUX_FUSED_LINGER", DefaultLingerUS, 0, 10_000_000, "microseconds from 0 to 10000000"); err != nil {
		return c, err
	}
	c.Rules = DefaultRules()
	tuned, ops, path, from, warn, err := tuningRules(getenv)
	if err != nil {
		return c, err
	}
	if warn != "" {
		c.Warnings = append(c.Warnings, warn)
	}
	c.Rules, c.Ops, c.Tuning, c.TuningFrom = append(c.Rules, tuned...), ops, path, from
	c.UserFrom = len(c.Rules)
	if v := getenv("COLLMUX_RULES"); v != "" {
		user, err := ParseRules(v, "COLLMUX_RULES")
		if err != nil {
			return c, err
		}
		c.Rules = append(c.Rules, user...)
	}
	return c, nil
}

// RulesOrigin says where the rules in force came from, source by source
// in order: "8 default, 2 from tuning table t.json (COLLMUX_TUNING), 1
// from COLLMUX_RULES".
func (c Config) RulesOrigin() string {
	var parts []string
	for i := 0; i < len(c.Rules); {
		j := i
		for j < len(c.Rules) && c.Rules[j].Source == c.Rules[i].Source {
			j++
		}
		from := "from " + c.Rules[i].Source
		switch src := c.Rules[i].Source; {
		case src == "default":
			from = "default"
		case c.Tuning != "" && src == "tuning table "+c.Tuning && c.TuningFrom != "":
			from += " (" + c.TuningFrom + ")"
		}
		parts = append(parts, fmt.Sprintf("%d %s", j-i, from))
		i = j
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// intVar reads the integer variable name: def when unset, an error saying
// what it wants when not a number from lo to hi.
func intVar(getenv func(string) string, name string, def, lo, hi int, want string) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return def, fmt.Errorf("%s=%q: want %s", name, v, want)
	}
	return n, nil
}

// choiceVar reads variable name as the index of its value among its
// Values in Vars (whose order the LogLevel, FusedAlgo and stream order
// constants follow); unset is the first.
func choiceVar(getenv func(string) string, name string) (int, error) {
	values := LookupVar(name).Values
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return 0, nil
	}
	if i := slices.IndexFunc(values, func(x string) bool { return strings.EqualFold(x, v) }); i >= 0 {
		return i, nil // any case: COLLMUX_LOG=INFO
	}
	last := len(values) - 1
	return 0, fmt.Errorf("%s=%q: want %s or %s", name, v, strings.Join(values[:last], ", "), values[last])
}

// boolVar reads a boolean variable (unset is false); the C side reads
// COLLMUX_DISABLE with the same grammar (capi/init.c, env_bool).
func boolVar(getenv func(string) string, name string) (bool, error) {
	switch v := strings.TrimSpace(getenv(name)); {
	case v == "" || isFalse(v):
		return false, nil
	case isTrue(v):
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want a boolean (1/0, true/false, yes/no, on/off)", name, v)
	}
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
