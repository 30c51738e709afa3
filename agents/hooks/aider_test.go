package hooks

import (
	"strings"
	"testing"
)

func TestIntegratePostCommit(t *testing.T) {
	out, keep := IntegratePostCommit("", false, false)
	if !keep || !strings.HasPrefix(out, shebang) || !strings.Contains(out, "reynfs checkpoint") {
		t.Fatalf("new hook %q", out)
	}
	if again, _ := IntegratePostCommit(out, true, false); again != out {
		t.Errorf("second integrate changed the hook:\n%s", again)
	}
	if back, keep := IntegratePostCommit(out, true, true); keep || back != "" {
		t.Errorf("remove of a hook integrate made: %q, keep %v", back, keep)
	}
	orig := "#!/bin/sh\nmake notify"
	out, _ = IntegratePostCommit(orig, true, false)
	if !strings.HasPrefix(out, orig+"\n") {
		t.Errorf("existing hook clobbered: %q", out)
	}
	if back, keep := IntegratePostCommit(out, true, true); !keep || back != orig+"\n" {
		t.Errorf("remove from an existing hook: %q, keep %v", back, keep)
	}
}
