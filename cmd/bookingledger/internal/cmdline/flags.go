package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// UsageError marks errors the user fixes by changing the command line or the environment: exit code 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

func UsageErrorf(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// EnvFlags is a flag set whose flags take their defaults from environment variables. A malformed
// environment value is reported with the variable's name, but only when the flag does not override it.
type EnvFlags struct {
	FS      *flag.FlagSet
	getenv  func(string) string
	envErrs map[string]error // by flag name
}

func NewEnvFlags(name string, getenv func(string) string, out io.Writer, usage string) *EnvFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n == 0 {
			fmt.Fprintln(out, usage)
			return
		}
		fmt.Fprintf(out, "%s\n\nFlags (each defaults to its environment variable):\n", usage)
		fs.PrintDefaults()
	}
	return &EnvFlags{FS: fs, getenv: getenv, envErrs: map[string]error{}}
}

// lookup returns the first non-empty variable of envs and its name.
func (e *EnvFlags) Lookup(envs []string) (name, value string) {
	for _, n := range envs {
		if v := strings.TrimSpace(e.getenv(n)); v != "" {
			return n, v
		}
	}
	return "", ""
}

// envHelp names a flag's variables; the flag package adds the default (the variable's value if set).
func envHelp(usage string, envs []string) string {
	return usage + " (env " + strings.Join(envs, ", then ") + ")"
}

func (e *EnvFlags) String(name string, envs []string, def, usage string) *string {
	p := new(string)
	*p = def
	if _, v := e.Lookup(envs); v != "" {
		*p = v
	}
	e.FS.StringVar(p, name, *p, envHelp(usage, envs))
	return p
}

// Secret is a string flag whose current value is never printed by -h.
func (e *EnvFlags) Secret(name string, envs []string, usage string) *string {
	p := new(string)
	if _, v := e.Lookup(envs); v != "" {
		*p = v
	}
	e.FS.Var((*secretValue)(p), name, envHelp(usage, envs))
	return p
}

type secretValue string

func (s *secretValue) String() string {
	if s == nil || *s == "" {
		return ""
	}
	return "<set>"
}
func (s *secretValue) Set(v string) error { *s = secretValue(v); return nil }

func (e *EnvFlags) Duration(name string, envs []string, def time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	*p = def
	if env, v := e.Lookup(envs); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			e.envErrs[name] = fmt.Errorf("%s=%q: not a Go duration such as 30s or 5m", env, v)
		case d <= 0:
			e.envErrs[name] = fmt.Errorf("%s=%q: must be positive", env, v)
		default:
			*p = d
		}
	}
	e.FS.Var(positiveDuration{p}, name, envHelp(usage, envs))
	return p
}

type positiveDuration struct{ p *time.Duration }

func (d positiveDuration) String() string {
	if d.p == nil {
		return ""
	}
	return d.p.String()
}

func (d positiveDuration) Set(v string) error {
	x, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("not a Go duration such as 30s or 5m")
	}
	if x <= 0 {
		return errors.New("must be positive")
	}
	*d.p = x
	return nil
}

// Int64 is an integer flag with a lower bound.
func (e *EnvFlags) Int64(name string, envs []string, def, minimum int64, usage string) *int64 {
	p := new(int64)
	*p = def
	if env, v := e.Lookup(envs); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			e.envErrs[name] = fmt.Errorf("%s=%q: not an integer", env, v)
		case n < minimum:
			e.envErrs[name] = fmt.Errorf("%s=%q: must be at least %d", env, v, minimum)
		default:
			*p = n
		}
	}
	e.FS.Var(boundedInt{p, minimum}, name, envHelp(usage, envs))
	return p
}

type boundedInt struct {
	p   *int64
	min int64
}

func (b boundedInt) String() string {
	if b.p == nil {
		return ""
	}
	return strconv.FormatInt(*b.p, 10)
}

func (b boundedInt) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	if n < b.min {
		return fmt.Errorf("must be at least %d", b.min)
	}
	*b.p = n
	return nil
}

// parse parses args, allowing flags before, between and after positional arguments, and returns the
// positional arguments. flag.ErrHelp is returned as is (the caller exits 0).
func (e *EnvFlags) Parse(args []string) ([]string, error) {
	var positional []string
	for {
		if err := e.FS.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, UsageError{err}
		}
		if e.FS.NArg() == 0 {
			break
		}
		positional = append(positional, e.FS.Arg(0))
		args = e.FS.Args()[1:]
	}
	set := map[string]bool{}
	e.FS.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	e.FS.VisitAll(func(f *flag.Flag) {
		if err := e.envErrs[f.Name]; err != nil && !set[f.Name] {
			errs = append(errs, err)
		}
	})
	if len(errs) > 0 {
		return nil, UsageError{errors.Join(errs...)}
	}
	return positional, nil
}

// Bool is a boolean flag (given alone, as --json, it means true); its variable takes the values
// strconv.ParseBool accepts.
func (e *EnvFlags) Bool(name string, envs []string, usage string) *bool {
	p := new(bool)
	if env, v := e.Lookup(envs); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.envErrs[name] = fmt.Errorf("%s=%q: want true or false", env, v)
		} else {
			*p = b
		}
	}
	e.FS.Var((*boolValue)(p), name, envHelp(usage, envs))
	return p
}

type boolValue bool

func (b *boolValue) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(bool(*b))
}

func (b *boolValue) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("want true or false")
	}
	*b = boolValue(x)
	return nil
}

// IsBoolFlag lets the flag package accept the flag without a value.
func (b *boolValue) IsBoolFlag() bool { return true }
