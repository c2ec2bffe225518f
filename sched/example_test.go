package sched_test

import (
	"fmt"

	"github.com/fulcrumlb/fulcrum/sched"
)

// A VIP configured with scheduler = "p2c": each lcore makes its own picker
// and generator, and passes the backends' current loads for each new flow.
func Example() {
	kind, err := sched.ParseKind("p2c")
	if err != nil {
		panic(err)
	}
	p, err := sched.New(kind, sched.Options{}) // two distinct draws
	if err != nil {
		panic(err)
	}
	rng := sched.NewRand(1) // per lcore
	loads := []sched.Load{
		{Weight: 1, Active: 12},
		{Weight: 1, Active: 3},
		{Weight: 0, Active: 0}, // draining: never chosen
	}
	// Two eligible backends and two distinct draws: both are compared.
	fmt.Println(p.Pick(loads, &rng))
	// Output: 1
}

// The seed 003 exercise's worked example.
func ExampleEWMA() {
	var e sched.EWMA
	for _, ms := range []int64{100, 200, 1000} {
		e.Observe(ms * 1000)
		us, _ := e.Micros()
		fmt.Printf("%d.%03d\n", us/1000, us%1000)
	}
	// Output:
	// 100.000
	// 130.000
	// 391.000
}
