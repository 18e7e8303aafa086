package collectives

// HierShape reports how the hierarchy sees c's communicator: its
// processes, its top-level groups (nodes under the node level, else
// processes) and whether this rank's process shares a node segment with
// others (0, 0, false without a hierarchy).
func HierShape(c *Coll) (procs, tops int, node bool) {
	if c == nil || c.hier == nil {
		return 0, 0, false
	}
	return c.hier.procs, c.hier.tops, c.hier.ng != nil || (c.hier.chunk > 0 && c.hier.g != nil && c.hier.li != 0)
}
