package main

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCommands are the command names run's switch accepts, read from run.go itself so that a command
// added there is held to the same rules.
func runCommands(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "run.go", nil, 0)
	require.NoError(t, err)
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if !ok {
			return true
		}
		if tag, ok := sw.Tag.(*ast.Ident); !ok || tag.Name != "cmd" {
			return true
		}
		for _, c := range sw.Body.List {
			for _, e := range c.(*ast.CaseClause).List {
				if lit, ok := e.(*ast.BasicLit); ok {
					name, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					if !strings.HasPrefix(name, "-") { // -h, --version: aliases
						names = append(names, name)
					}
				}
			}
		}
		return false
	})
	require.NotEmpty(t, names, "run's switch on cmd")
	return names
}

// helpLines are the usage lines of 'bookingledger help', "bookingledger <command> ...", without the
// "bookingledger " and the description beside them.
func helpLines(t *testing.T) []string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"help"}, func(string) string { return "" }, &out, &out))
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(l, "  bookingledger "); ok {
			rest, _, _ = strings.Cut(rest, "   ") // the description beside a short line
			lines = append(lines, rest)
		}
	}
	return lines
}

// Every command's -h prints its usage and flags, each flag naming its variable, and exits 0.
func TestEveryCommandsHelpNamesEachFlagsVariable(t *testing.T) {
	for _, name := range runCommands(t) {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{name, "-h"}, func(string) string { return "" }, &out, &errOut)
			require.NoError(t, err, "%s -h", name)
			help := out.String() + errOut.String()
			assert.Contains(t, help, "Usage:", "%s -h prints its usage", name)
			assert.NotContains(t, help, "(env )", "every flag names its variable")
			assert.NotContains(t, help, "bookingledger (devel)", "-h is help, not the command")
			for _, line := range strings.Split(help, "\n") {
				if strings.HasPrefix(line, "  -") {
					flagName := strings.Fields(line)[0]
					assert.Regexp(t, `\(env BOOKINGLEDGER_[A-Z_]+`, flagHelp(help, line), "%s %s names its variable", name, flagName)
				}
			}
		})
	}
}

// flagHelp is a flag's help: its line and the indented description lines after it.
func flagHelp(help, line string) string {
	i := strings.Index(help, line)
	rest := help[i+len(line):]
	if j := strings.Index(rest, "\n  -"); j >= 0 {
		rest = rest[:j]
	}
	return line + rest
}

var actionWord = regexp.MustCompile(`^[a-z][a-z-]*$`)

// help lists every command, and each of its usage lines names a real command and action: the
// command's own -h shows the action, and running it is never refused as unknown.
func TestHelpListsEveryCommandAndOnlyRealOnes(t *testing.T) {
	lines := helpLines(t)
	var listed []string
	for _, l := range lines {
		listed = append(listed, strings.Fields(l)[0])
	}
	for _, name := range runCommands(t) {
		assert.Contains(t, listed, name, "help lists %s", name)
	}
	for _, l := range lines {
		name := strings.Fields(l)[0]
		t.Run(l, func(t *testing.T) {
			require.True(t, slices.Contains(runCommands(t), name), "%s is a command run knows", name)
			var out, errOut bytes.Buffer
			require.NoError(t, run(context.Background(), []string{name, "-h"}, func(string) string { return "" }, &out, &errOut))
			usage := out.String() + errOut.String()
			// "endpoints list | disable ID | ...": each alternative may name an action.
			for _, alt := range strings.Split(strings.TrimPrefix(l, name), " | ") {
				words := strings.Fields(alt)
				if len(words) > 0 && words[0] == name {
					words = words[1:]
				}
				if len(words) == 0 || !actionWord.MatchString(words[0]) {
					continue
				}
				action := words[0]
				assert.Contains(t, usage, name+" "+action, "%s -h shows %s", name, action)
				// Without a database every action stops at a usage or connection error, never at an
				// unknown action (which quotes it).
				var o, e bytes.Buffer
				err := run(context.Background(), []string{name, action}, func(string) string { return "" }, &o, &e)
				if err != nil {
					assert.NotContains(t, err.Error(), strconv.Quote(action), "%s %s is an action %s knows", name, action, name)
				}
			}
			for _, flagName := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(l, -1) {
				assert.Regexp(t, `(?m)^  -`+flagName[1]+`( |$)`, usage, "%s -h documents --%s", name, flagName[1])
			}
		})
	}
}
