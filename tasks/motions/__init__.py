"""Reference motions mjrl ships, for the tracking task (`mjrl:motions/NAME.npz`): made by
`python scripts/make_motions.py`, which says how each is made. No copied mocap."""
