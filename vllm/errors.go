package vllm

import (
	"fmt"
	"strings"
)

// ArgError is a command line vLLM's argument parser refuses: an unknown flag, a missing or bad
// value. argparse prints `vllm serve: error: <message>` and exits with status 2.
type ArgError struct {
	// Flag names the option as argparse does ("--tensor-parallel-size/-tp"); "" for errors that
	// concern no single flag (a stray positional, the program name).
	Flag string
	// Value is the offending value as given ("" when there was none).
	Value  string
	Reason string
	// Prog is the parser that refuses it, as argparse names it in the message: "vllm serve"
	// (the default) for an argument, "vllm" for leftover words, "api_server.py" for the
	// OpenAI entrypoint's parser.
	Prog string
	// Detail is what argparse's message leaves to the lines after it: pydantic's report of each
	// error of a config, "; "-separated ("" for most errors).
	Detail string
}

func (e *ArgError) Error() string {
	if e.Detail != "" {
		return e.line() + ": " + e.Detail
	}
	return e.line()
}

// validationArgError is argparse's error for a config pydantic refused: the line vLLM prints
// ends at the count ("1 validation error for C", "N validation errors for C"), the errors (each
// "field: message [input_value=...]") are its Detail.
func validationArgError(flag, value, class string, errs []string) *ArgError {
	return &ArgError{Flag: flag, Value: value, Reason: validationCount(class, len(errs)), Detail: strings.Join(errs, "; ")}
}

// line is the error line argparse prints last, "<prog>: error: ...".
func (e *ArgError) line() string {
	prog := e.Prog
	if prog == "" {
		prog = progServe
	}
	if e.Flag == "" {
		return prog + ": error: " + e.Reason
	}
	return fmt.Sprintf("%s: error: argument %s: %s", prog, e.Flag, e.Reason)
}

// PyError is a Python exception raised by vLLM's config code, rendered as the process would
// print it last: "<Type>: <message>", or the bare type when there is no message (a bare
// `assert`).
type PyError struct {
	Type string
	Msg  string
}

func (e *PyError) Error() string {
	if e.Msg == "" {
		return e.Type
	}
	return e.Type + ": " + e.Msg
}

// Python exception constructors, named after the type they raise.

func valueError(format string, args ...any) *PyError {
	return &PyError{Type: "ValueError", Msg: fmt.Sprintf(format, args...)}
}

func assertionError(format string, args ...any) *PyError {
	return &PyError{Type: "AssertionError", Msg: fmt.Sprintf(format, args...)}
}

// validationError is what pydantic raises when a config dataclass's validator (or a ValueError in
// its __post_init__) rejects a value: the ValueError's text wrapped in a ValidationError.
func validationError(model, format string, args ...any) *PyError {
	return &PyError{
		Type: "pydantic_core.ValidationError",
		Msg:  fmt.Sprintf("1 validation error for %s: Value error, %s", model, fmt.Sprintf(format, args...)),
	}
}

// zeroDivision is Python's message for `x // 0` on ints.
var zeroDivision = &PyError{Type: "ZeroDivisionError", Msg: "integer division or modulo by zero"}

// zeroModulo is Python's message for `x % 0` on ints since 3.11 (3.10, the oldest Python vLLM
// supports, still says zeroDivision's text for both); the model speaks the Python of current
// deployments and of the probe's conformance runs.
var zeroModulo = &PyError{Type: "ZeroDivisionError", Msg: "integer modulo by zero"}

// bareAssertion is a bare `assert cond` failing (the legacy Mooncake DP index helper).
var bareAssertion = &PyError{Type: "AssertionError"}

// argparseExit renders an ArgError the way the process ends: argparse calls sys.exit(2) after
// printing the message, so the exception is SystemExit with status 2.
func argparseExit(e *ArgError) string {
	return "SystemExit: 2 (" + e.line() + ")"
}
