"""Reference motions mjrl ships, for the tracking task (`mjrl:motions/NAME.npz`): made by
`mjrl motion make`, which says how each is made. No copied mocap."""
