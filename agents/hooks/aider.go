package hooks

import "strings"

// aiderBlock is what integrate adds to .git/hooks/post-commit: each commit
// (Aider commits after every edit) becomes a generation. The markers let
// --remove take out exactly this block; the hook never fails the commit.
const aiderBlock = `# >>> reynfs (reynfs integrate aider)
reynfs checkpoint --kind tool -m "commit $(git rev-parse --short HEAD)" >/dev/null 2>&1 || true
# <<< reynfs
`

const shebang = "#!/bin/sh\n"

// IntegratePostCommit returns the post-commit hook with reynfs's block
// added (remove: taken out) and whether the file should exist at all ("" for
// none, when it held only what integrate wrote). existed says whether the
// hook file was there.
func IntegratePostCommit(hook string, existed, remove bool) (string, bool) {
	has := strings.Contains(hook, aiderBlock)
	switch {
	case !remove && has:
		return hook, existed
	case !remove && !existed:
		return shebang + aiderBlock, true
	case !remove:
		if hook != "" && !strings.HasSuffix(hook, "\n") {
			hook += "\n"
		}
		return hook + aiderBlock, true
	case !has:
		return hook, existed
	}
	out := strings.Replace(hook, aiderBlock, "", 1)
	if out == shebang {
		return "", false
	}
	return out, true
}
