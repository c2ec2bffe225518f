package config

// checkHealthTunnel refuses checks through the tunnel that the LB cannot
// send: the check is a connection of the host's kernel from the LB's
// address through the exception tap (see dataplane/healthpath.go), so it
// needs the exception path and an LB address of the VIP's family.
func (ck *checker) checkHealthTunnel(c *Config, at string, v *VIP) {
	h := &v.Health
	if h.Kind == HealthNone || !h.Tunnelled() {
		return
	}
	path := at + ".health.through"
	if !ck.loc.has(path) && ck.loc.has("health.through") {
		path = "health.through" // inherited from [health]: point there
	}
	d := &c.Dataplane
	if d.Exception != nil && !*d.Exception {
		ck.bad(path, `"tunnel" needs the exception path (the check is the host kernel's connection through it): dataplane.exception is off`)
		return
	}
	src, name := d.LBIPv4, "lb_ipv4"
	if v.Address.Is6() {
		src, name = d.LBIPv6, "lb_ipv6"
	}
	if v.Address.IsValid() && !src.IsValid() {
		ck.bad(path, `"tunnel" needs dataplane.%s: the check of VIP %v leaves from the LB's address of its family`, name, v.Address)
	}
}
