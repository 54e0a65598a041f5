//go:build unix

package settings

import (
	"io/fs"
	"syscall"
)

// ownerOf returns the owner of the file st describes.
func ownerOf(st fs.FileInfo) (owner, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return owner{}, false
	}
	return owner{uid: int(sys.Uid), gid: int(sys.Gid)}, true
}
