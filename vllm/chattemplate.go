package vllm

import (
	"slices"
	"strings"
)

// chatTemplateError is vllm/entrypoints/chat_utils.py validate_chat_template over a
// --chat-template string, the first of validate_parsed_serve_args's checks: a value holding none
// of "{", "}" or a newline is a path, and raises ValueError unless it exists, as given (relative
// to the working directory) or in the package's built-in chat_templates directory. A simulated
// host holds vLLM's package and no file of the user's, so a path exists only when it names a
// directory every host has (the working directory, its parent, the root) or a built-in template.
func chatTemplateError(t string, inst Install) error {
	if strings.ContainsAny(t, "{}\n") || hostPathExists(t) {
		return nil
	}
	builtin := joinPath(inst.packageDir()+"/transformers_utils/chat_templates", t)
	dir := inst.packageDir() + "/transformers_utils/chat_templates/"
	if name, ok := strings.CutPrefix(builtin, dir); ok && slices.Contains(inst.chatTemplates(), name) {
		return nil
	}
	return valueError("The supplied chat template string (%s) appears path-like, but doesn't exist! Tried: %s and %s", t, t, builtin)
}

// hostPathExists is Path(p).exists() on a simulated host: true for the directories every host has.
func hostPathExists(p string) bool {
	switch purePath(p) {
	case ".", "..", "/", "//":
		return true
	}
	return false
}

// joinPath is pathlib's dir / p: an absolute p replaces dir.
func joinPath(dir, p string) string {
	if strings.HasPrefix(p, "/") {
		return purePath(p)
	}
	if rel := purePath(p); rel != "." {
		return purePath(dir + "/" + rel)
	}
	return purePath(dir)
}

// purePath is str(PurePosixPath(p)): empty and "." components dropped, ".." kept, a leading "//"
// (exactly two slashes) kept, "." for nothing left.
func purePath(p string) string {
	root := ""
	switch {
	case strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "///"):
		root = "//"
	case strings.HasPrefix(p, "/"):
		root = "/"
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			parts = append(parts, c)
		}
	}
	if root == "" && len(parts) == 0 {
		return "."
	}
	return root + strings.Join(parts, "/")
}
