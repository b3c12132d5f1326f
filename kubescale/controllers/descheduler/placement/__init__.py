"""Would the active policy evict this pod from that node: the rules the scheduler extender
shares with the strategies."""
