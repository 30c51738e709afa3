package cas

import (
	"errors"
	"fmt"
	"slices"
)

// Walk visits every inode object reachable from roots (inode-object hashes,
// such as generation roots) once, parents before children and entries in name
// order, calling visit(h, in) with the decoded inode. The chunks of regular
// files are reachable too: each distinct one is visited once with in == nil,
// without reading its data (Walk does not check that it exists; Verify does).
// Zero (a hole) is not an object and is never visited.
//
// Shared subtrees are visited once. Inode objects and chunks are deduplicated
// separately: a file whose content happens to equal an inode object's bytes
// shares its hash with it, and that hash is then visited once as each. Walk
// stops at the first error, including one returned by visit.
func Walk(s Store, roots []Hash, visit func(h Hash, in *Inode) error) error {
	return walk(s, roots, visit, func(err error) error { return err })
}

// maxVerifyErrors bounds how many failures Verify reports one by one.
const maxVerifyErrors = 100

// Verify reads (and so re-hashes, see Store.Get) every object reachable from
// roots: inode objects and file chunks. It does not stop at the first bad
// object: objects is how many objects it checked (a hash that is both an
// inode object and a chunk counts twice, as in Walk), and err joins the
// failures (ErrCorrupt, ErrNotFound or ErrInvalidInode; the subtree under an
// unreadable inode object is not reached). Objects a Badger store serves from
// its cache were verified when they entered it.
func Verify(s Store, roots []Hash) (objects int, err error) {
	var errs []error
	failed := 0
	record := func(err error) error {
		failed++
		if len(errs) < maxVerifyErrors {
			errs = append(errs, err)
		}
		return nil
	}
	err = walk(s, roots, func(h Hash, in *Inode) error {
		objects++
		if in != nil {
			return nil // walk has just read it
		}
		if _, err := s.Get(h); err != nil {
			return record(fmt.Errorf("chunk: %w", err))
		}
		return nil
	}, func(err error) error {
		objects++
		return record(err)
	})
	if err != nil { // not reached: neither callback above fails
		return objects, fmt.Errorf("verify: %w", err)
	}
	if failed > len(errs) {
		errs = append(errs, fmt.Errorf("and %d more", failed-len(errs)))
	}
	if failed > 0 {
		return objects, fmt.Errorf("verify: %d of %d objects failed: %w",
			failed, objects, errors.Join(errs...))
	}
	return objects, nil
}

// walk is Walk with a choice: onLoad gets every failure to read or decode an
// inode object and returns nil to skip that subtree and carry on, or an error
// to stop.
func walk(s Store, roots []Hash, visit func(Hash, *Inode) error, onLoad func(error) error) error {
	inodes := make(map[Hash]struct{})
	chunks := make(map[Hash]struct{})
	stack := slices.Clone(roots)
	slices.Reverse(stack) // pop the first root first
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := inodes[h]; ok {
			continue
		}
		inodes[h] = struct{}{}
		in, err := loadInode(s, h)
		if err != nil {
			if err := onLoad(fmt.Errorf("walk: %w", err)); err != nil {
				return err
			}
			continue
		}
		if err := visit(h, in); err != nil {
			return fmt.Errorf("walk: visit %s: %w", h.Short(), err)
		}
		for _, c := range in.Chunks {
			if _, ok := chunks[c]; ok || c.IsZero() {
				continue
			}
			chunks[c] = struct{}{}
			if err := visit(c, nil); err != nil {
				return fmt.Errorf("walk: visit chunk %s of inode %d: %w", c.Short(), in.Ino, err)
			}
		}
		for i := len(in.Entries) - 1; i >= 0; i-- { // reversed: pop in name order
			if _, ok := inodes[in.Entries[i].Object]; !ok {
				stack = append(stack, in.Entries[i].Object)
			}
		}
	}
	return nil
}

// loadInode gets and decodes the inode object named h.
func loadInode(s Store, h Hash) (*Inode, error) {
	data, err := s.Get(h)
	if err != nil {
		return nil, err
	}
	in, err := DecodeInode(data)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", h.Short(), err)
	}
	return in, nil
}
