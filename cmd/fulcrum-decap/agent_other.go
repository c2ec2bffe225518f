//go:build !linux

package main

import (
	"errors"
	"log/slog"

	"github.com/fulcrumlb/fulcrum/decap"
)

// agent needs Linux's TUN device and raw sockets.
type agent struct{ failed chan error }

func start(options, *decap.Decapsulator, *slog.Logger) (*agent, error) {
	return nil, errors.New("fulcrum-decap runs on Linux only")
}

func (a *agent) stop()              {}
func (a *agent) logCounters(string) {}
