package journal

import (
	"fmt"
	"strings"
)

// fieldNames names each field tag for error messages.
var fieldNames = [tagMax]string{
	tagParent: "Parent", tagName: "Name", tagNewParent: "NewParent", tagNewName: "NewName",
	tagIno: "Ino", tagMode: "Mode", tagUid: "Uid", tagGid: "Gid", tagRdev: "Rdev",
	tagFlags: "Flags", tagTarget: "Target", tagSize: "Size", tagKind: "Kind",
	tagChunks: "Chunks", tagValid: "Valid", tagAtime: "Atime", tagMtime: "Mtime",
	tagXName: "XName", tagXValue: "XValue", tagGenKind: "GenKind", tagLabel: "Label",
	tagRoot: "Root", tagNextIno: "NextIno", tagResetTo: "ResetTo",
	tagSupersedes: "Supersedes", tagAgents: "Agents", tagHoles: "Holes",
	tagRun: "Run", tagAgent: "Agent",
}

func fields(tags ...int) uint32 {
	var m uint32
	for _, t := range tags {
		m |= 1 << t
	}
	return m
}

// opFields lists the fields each op may set (see the Op constants). Every op
// may also set Seq, Time, Pid and Comm, and Run and Agent (tagged fields
// that setFields leaves out).
var opFields = [opMax]uint32{
	OpCreate:      fields(tagParent, tagName, tagIno, tagMode, tagUid, tagGid, tagRdev),
	OpMkdir:       fields(tagParent, tagName, tagIno, tagMode, tagUid, tagGid),
	OpSymlink:     fields(tagParent, tagName, tagIno, tagTarget, tagUid, tagGid),
	OpLink:        fields(tagParent, tagName, tagIno),
	OpUnlink:      fields(tagParent, tagName),
	OpRmdir:       fields(tagParent, tagName),
	OpRename:      fields(tagParent, tagName, tagNewParent, tagNewName, tagFlags),
	OpData:        fields(tagIno, tagSize, tagKind, tagChunks, tagMtime, tagHoles),
	OpSetattr:     fields(tagIno, tagValid, tagMode, tagUid, tagGid, tagAtime, tagMtime),
	OpSetxattr:    fields(tagIno, tagXName, tagXValue, tagFlags),
	OpRemovexattr: fields(tagIno, tagXName),
	OpGeneration:  fields(tagGenKind, tagLabel, tagRoot, tagNextIno, tagAgents),
	OpReset:       fields(tagResetTo, tagSupersedes, tagLabel),
	OpAgentState:  fields(tagLabel, tagRoot),
	OpImport:      fields(tagRoot, tagNextIno, tagLabel),
	OpRestore:     fields(tagParent, tagName, tagRoot, tagIno, tagLabel),
}

// setFields returns the mask of r's non-zero fields.
func (r *Record) setFields() uint32 {
	var m uint32
	set := func(tag int, nonzero bool) {
		if nonzero {
			m |= 1 << tag
		}
	}
	set(tagParent, r.Parent != 0)
	set(tagName, r.Name != "")
	set(tagNewParent, r.NewParent != 0)
	set(tagNewName, r.NewName != "")
	set(tagIno, r.Ino != 0)
	set(tagMode, r.Mode != 0)
	set(tagUid, r.Uid != 0)
	set(tagGid, r.Gid != 0)
	set(tagRdev, r.Rdev != 0)
	set(tagFlags, r.Flags != 0)
	set(tagTarget, r.Target != "")
	set(tagSize, r.Size != 0)
	set(tagKind, r.Kind != 0)
	set(tagChunks, len(r.Chunks) > 0)
	set(tagValid, r.Valid != 0)
	set(tagAtime, r.Atime != 0)
	set(tagMtime, r.Mtime != 0)
	set(tagXName, r.XName != "")
	set(tagXValue, len(r.XValue) > 0)
	set(tagGenKind, r.GenKind != "")
	set(tagLabel, r.Label != "")
	set(tagRoot, !r.Root.IsZero())
	set(tagNextIno, r.NextIno != 0)
	set(tagResetTo, r.ResetTo != 0)
	set(tagSupersedes, r.Supersedes != 0)
	set(tagAgents, len(r.Agents) > 0)
	set(tagHoles, len(r.Holes) > 0)
	return m
}

// Validate checks what the journal can check without the tree: a known op,
// no field the op does not use (a set field the replay would ignore is a
// bug in the caller), and a size the encoding accepts. Reset targets are
// checked against the seq at append time. Errors wrap ErrInvalid.
func (r *Record) Validate() error {
	if r.Op == OpInvalid || r.Op >= opMax {
		return fmt.Errorf("%w: unknown op %d", ErrInvalid, r.Op)
	}
	if extra := r.setFields() &^ opFields[r.Op]; extra != 0 {
		var names []string
		for t := 1; t < tagMax; t++ {
			if extra&(1<<t) != 0 {
				names = append(names, fieldNames[t])
			}
		}
		return fmt.Errorf("%w: %s record sets %s, which %s does not use",
			ErrInvalid, r.Op, strings.Join(names, ", "), r.Op)
	}
	if r.Op == OpReset && r.ResetTo >= r.Seq && r.Seq != 0 {
		return fmt.Errorf("%w: reset at seq %d targets seq %d, not an earlier one", ErrInvalid, r.Seq, r.ResetTo)
	}
	if err := checkHoles(r.Holes); err != nil {
		return err
	}
	if n := r.EncodedLen(); n > MaxRecordSize {
		return fmt.Errorf("%w: %s record is %d bytes, more than %d", ErrTooLarge, r.Op, n, MaxRecordSize)
	}
	return nil
}

// checkHoles accepts what Decode accepts: sorted ranges, none empty, none
// wrapping, none touching the one before (it would be one range).
func checkHoles(hs []HoleRange) error {
	end := uint64(0)
	for i, h := range hs {
		switch {
		case h.Count == 0:
			return fmt.Errorf("%w: hole range %d is empty", ErrInvalid, i)
		case h.Start+h.Count < h.Start:
			return fmt.Errorf("%w: hole range %d wraps", ErrInvalid, i)
		case i > 0 && h.Start <= end:
			return fmt.Errorf("%w: hole range %d overlaps or touches the one before", ErrInvalid, i)
		}
		end = h.Start + h.Count
	}
	return nil
}
