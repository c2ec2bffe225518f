package dataplane

import (
	"fmt"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/encap"
)

// NewEncapsulator makes the encapsulator the [dataplane] section describes.
func NewEncapsulator(cfg *config.Config) (*encap.Encapsulator, error) {
	d := &cfg.Dataplane
	df, err := encap.ParseDF(d.DF)
	if err != nil {
		return nil, err
	}
	e, err := encap.New(encap.Config{
		SrcV4:   d.LBIPv4.Addr,
		SrcV6:   d.LBIPv6.Addr,
		TTL:     uint8(d.TTL),
		DF:      df,
		MTU:     d.MTU,
		GUEPort: uint16(d.GUEPort),
	})
	if err != nil {
		return nil, fmt.Errorf("%s: dataplane: %w", cfg.File, err)
	}
	return e, nil
}
