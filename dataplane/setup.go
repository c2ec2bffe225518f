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
	e, err := encap.New(cfg.EncapConfig(df)) // the mapping config validated
	if err != nil {
		return nil, fmt.Errorf("%s: dataplane: %w", cfg.File, err)
	}
	return e, nil
}
