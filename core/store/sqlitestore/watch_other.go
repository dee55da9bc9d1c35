//go:build !linux

// Without inotify the watcher polls the WAL-index header (watch.go).
package sqlitestore

import "errors"

func watchWrites(string) (writeEvents, error) {
	return nil, errors.New("no file-change notifications here: the watcher polls")
}

func watchBells(string) (bellEvents, error) {
	return nil, errors.New("no file-change notifications here: no doorbells are heard")
}
