// lossyfs mounts a folder through FUSE and, on SIGUSR1, forgets every write
// that was not fsynced: what a machine's disk holds after its power is cut.
//
//	lossyfs <backing folder> <mount point>
//
// The tests run nats-server on the mount point, kill it with SIGKILL, send
// SIGUSR1, and start it again on what is left. A kill alone loses nothing
// (the kernel still holds the unsynced pages and writes them later); the
// power cut is what loses them, and that is what this tool reproduces.
//
// The model, per file (by inode, so renames keep it):
//   - the synced size is the file's size when first seen or at its last
//     fsync (or fdatasync, or any write to a file opened O_SYNC/O_DSYNC);
//   - a write or a truncation inside the synced part first saves the bytes
//     it replaces;
//   - on SIGUSR1 the saved bytes are written back, newest first, and the
//     file is cut to its synced size. A file created since, never synced,
//     is left empty.
//
// Names (create, rename, unlink) are kept as they are, as a journaling file
// system would after its next commit. It prints "lossyfs: mounted" once the
// mount is up and one line per SIGUSR1 saying what it dropped; SIGTERM
// unmounts and exits.
package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// saved is a range of a file as it was when last synced.
type saved struct {
	off   int64
	bytes []byte
}

// tracked is what a file looked like at its last sync.
type tracked struct {
	syncedSize int64
	undo       []saved
}

// ledger holds every file written since mounting, by backing inode. One lock
// for all: a write's save and its write must not interleave with another's,
// and the tests' load is small.
type ledger struct {
	mu    sync.Mutex
	files map[uint64]*tracked
}

func (l *ledger) entry(ino uint64, size int64) *tracked {
	t, ok := l.files[ino]
	if !ok {
		t = &tracked{syncedSize: size}
		l.files[ino] = t
	}
	return t
}

// save keeps the synced bytes of [off, end) that are about to change. What
// lies past the file's end now was saved by the cut that removed it.
func (t *tracked) save(f *os.File, off, end int64) {
	if end > t.syncedSize {
		end = t.syncedSize
	}
	if off >= end {
		return
	}
	buf := make([]byte, end-off)
	n, _ := f.ReadAt(buf, off)
	t.undo = append(t.undo, saved{off: off, bytes: buf[:n]})
}

func (t *tracked) synced(size int64) {
	t.syncedSize = size
	t.undo = nil
}

var book = &ledger{files: map[uint64]*tracked{}}

// file wraps the loopback handle: its writes, truncations and syncs pass
// through the ledger. It does not offer a passthrough descriptor, so every
// write reaches this process.
type file struct {
	inner *gofs.LoopbackFile
	os    *os.File
	ino   uint64
	sync  bool
}

func openFile(path string, flags int) (*file, syscall.Errno) {
	flags &^= syscall.O_APPEND
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		// Saving what a write replaces needs to read it.
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, gofs.ToErrno(err)
	}
	dup, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		f.Close()
		return nil, gofs.ToErrno(err)
	}
	return &file{
		inner: gofs.NewLoopbackFile(dup).(*gofs.LoopbackFile),
		os:    f,
		ino:   st.Ino,
		sync:  flags&(syscall.O_SYNC|syscall.O_DSYNC) != 0,
	}, 0
}

func (f *file) size() int64 {
	var st syscall.Stat_t
	if syscall.Fstat(int(f.os.Fd()), &st) != nil {
		return 0
	}
	return st.Size
}

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.inner.Read(ctx, buf, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	book.mu.Lock()
	defer book.mu.Unlock()
	t := book.entry(f.ino, f.size())
	t.save(f.os, off, off+int64(len(data)))
	n, errno := f.inner.Write(ctx, data, off)
	if errno == 0 && f.sync {
		t.synced(f.size())
	}
	return n, errno
}

func (f *file) truncate(size int64) {
	book.mu.Lock()
	defer book.mu.Unlock()
	t := book.entry(f.ino, f.size())
	t.save(f.os, size, t.syncedSize)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	errno := f.inner.Fsync(ctx, flags)
	if errno == 0 {
		book.mu.Lock()
		book.entry(f.ino, 0).synced(f.size())
		book.mu.Unlock()
	}
	return errno
}

func (f *file) Flush(ctx context.Context) syscall.Errno { return f.inner.Flush(ctx) }

func (f *file) Release(ctx context.Context) syscall.Errno {
	f.os.Close()
	return f.inner.Release(ctx)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.inner.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		f.truncate(int64(sz))
	}
	return f.inner.Setattr(ctx, in, out)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.inner.Lseek(ctx, off, whence)
}

func (f *file) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	return f.inner.Allocate(ctx, off, size, mode)
}

// node is a loopback node whose files are wrapped.
type node struct {
	gofs.LoopbackNode
}

func (n *node) backing() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	path := n.backing()
	if flags&syscall.O_TRUNC != 0 {
		if f, errno := openFile(path, syscall.O_RDONLY); errno == 0 {
			f.truncate(0)
			f.os.Close()
			f.inner.Release(ctx)
		}
	}
	f, errno := openFile(path, int(flags)&^fuse.FMODE_EXEC)
	if errno != 0 {
		return nil, 0, errno
	}
	return f, 0, 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	inode, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// The loopback handle stays for Release; the file's writes go through
	// a wrapped handle of the same file.
	fh.(gofs.FileReleaser).Release(ctx)
	f, errno := openFile(filepath.Join(n.backing(), name), int(flags)&^(syscall.O_CREAT|syscall.O_EXCL|syscall.O_TRUNC))
	if errno != 0 {
		return nil, nil, 0, errno
	}
	book.mu.Lock()
	book.entry(f.ino, 0)
	book.mu.Unlock()
	return inode, f, fuseFlags, 0
}

func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && fh == nil {
		if f, errno := openFile(n.backing(), syscall.O_RDONLY); errno == 0 {
			f.truncate(int64(sz))
			f.os.Close()
			f.inner.Release(ctx)
		}
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// powerCut puts every file back as it was at its last sync.
func powerCut(root string) (files int, dropped int64, err error) {
	book.mu.Lock()
	defer book.mu.Unlock()
	paths := map[uint64]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		paths[info.Sys().(*syscall.Stat_t).Ino] = p
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	inos := make([]uint64, 0, len(book.files))
	for ino := range book.files {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		t := book.files[ino]
		p, ok := paths[ino]
		if !ok {
			continue // removed since: its name is gone for good
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return files, dropped, err
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return files, dropped, err
		}
		changed := info.Size() != t.syncedSize || len(t.undo) > 0
		if info.Size() > t.syncedSize {
			dropped += info.Size() - t.syncedSize
		}
		if err := f.Truncate(t.syncedSize); err != nil {
			f.Close()
			return files, dropped, err
		}
		for i := len(t.undo) - 1; i >= 0; i-- {
			u := t.undo[i]
			if _, err := f.WriteAt(u.bytes, u.off); err != nil {
				f.Close()
				return files, dropped, err
			}
			dropped += int64(len(u.bytes))
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return files, dropped, err
		}
		f.Close()
		if changed {
			files++
		}
		t.undo = nil
	}
	return files, dropped, nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: lossyfs <backing folder> <mount point>")
		os.Exit(2)
	}
	backing, mountpoint := os.Args[1], os.Args[2]
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		fmt.Fprintln(os.Stderr, "lossyfs:", err)
		os.Exit(1)
	}
	root := &gofs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *gofs.LoopbackRoot, _ *gofs.Inode, _ string, _ *syscall.Stat_t) gofs.InodeEmbedder {
		return &node{gofs.LoopbackNode{RootData: r}}
	}
	rootNode := root.NewNode(root, nil, "", &st)
	root.RootNode = rootNode
	// No attribute or name caching: after a power cut the kernel must ask
	// again for sizes.
	zero := time.Duration(0)
	server, err := gofs.Mount(mountpoint, rootNode, &gofs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMount: true,
			FsName:      "lossyfs",
			Name:        "lossyfs",
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lossyfs: mount:", err)
		os.Exit(1)
	}
	fmt.Println("lossyfs: mounted")

	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for s := range signals {
			if s != syscall.SIGUSR1 {
				server.Unmount()
				return
			}
			files, dropped, err := powerCut(backing)
			if err != nil {
				fmt.Println("lossyfs: power cut failed:", err)
				continue
			}
			fmt.Printf("lossyfs: power cut: dropped %d bytes in %d files\n", dropped, files)
		}
	}()
	server.Wait()
}
