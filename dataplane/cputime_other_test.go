//go:build !linux

package dataplane

import "time"

func threadCPU() time.Duration { return 0 }
