package punt

import (
	"errors"
	"reflect"
	"testing"
)

// TestConfig: zero rates take the defaults, every class names its key,
// and each bad rate is one error naming its class.
func TestConfig(t *testing.T) {
	if got := (Config{BGP: 7}).Rates(); got != (Rates{Default.Neighbour, 7, Default.Health, Default.Other}) {
		t.Errorf("rates %v", got)
	}
	// Every Config field's TOML key is its class's name, in class order.
	ty := reflect.TypeOf(Config{})
	if ty.NumField() != NumClasses {
		t.Fatalf("%d fields, %d classes", ty.NumField(), NumClasses)
	}
	for i := 0; i < ty.NumField(); i++ {
		if k := ty.Field(i).Tag.Get("toml"); k != Class(i).String() {
			t.Errorf("field %d: key %q, class %q", i, k, Class(i))
		}
	}
	err := Config{Neighbour: -1, Other: MaxRate + 1, BGP: MaxRate}.Validate()
	var keys []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is no FieldError", e)
		}
		keys = append(keys, fe.Key)
	}
	if !reflect.DeepEqual(keys, []string{"neighbour", "other"}) {
		t.Errorf("bad keys %v, want neighbour and other", keys)
	}
	if Burst(1000) != 100 || Burst(5) != MinBurst {
		t.Errorf("bursts %d %d", Burst(1000), Burst(5))
	}
}
