package server

import (
	"context"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the configuration whenever its file changes, until ctx
// ends. It watches the file's directory, since editors and Kubernetes
// ConfigMaps replace a file by renaming another over it, which a watch on
// the file itself would lose. Bursts of events within debounce are one
// reload.
func (s *Server) Watch(ctx context.Context, debounce time.Duration) error {
	if s.file == "" {
		return nil
	}
	go s.watchRLS(ctx, debounce)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	file, err := filepath.Abs(s.file)
	if err != nil {
		return err
	}
	if err := w.Add(filepath.Dir(file)); err != nil {
		return err
	}
	d := newDebouncer(debounce)
	defer d.stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name, _ := filepath.Abs(ev.Name)
			// A ConfigMap swaps a "..data" symlink; the file's own name sees
			// no event then, so a change of "..data" counts too.
			if name != file && filepath.Base(ev.Name) != "..data" {
				continue
			}
			if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) == 0 {
				continue
			}
			d.kick()
		case <-d.fire:
			s.logger.Info("configuration file changed; reloading", "file", s.file)
			s.Reload()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.logger.Warn("watching the configuration file", "error", err)
		}
	}
}

// debouncer sends on fire once no kick has come for its delay.
type debouncer struct {
	delay time.Duration
	timer *time.Timer
	fire  chan struct{}
}

func newDebouncer(delay time.Duration) *debouncer {
	return &debouncer{delay: delay, fire: make(chan struct{}, 1)}
}

func (d *debouncer) kick() {
	if d.timer != nil {
		d.timer.Reset(d.delay)
		return
	}
	d.timer = time.AfterFunc(d.delay, func() {
		select {
		case d.fire <- struct{}{}:
		default:
		}
	})
}

func (d *debouncer) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}
