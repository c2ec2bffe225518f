package packet

import "github.com/fulcrumlb/fulcrum/flow"

type flowTuple = flow.Tuple

var flowTupleFrom = flow.TupleFrom
