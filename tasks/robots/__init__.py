"""mjrl's own robots, for any task: each an MJCF file (`go1.xml`, `mule.xml`, `humanoid.xml`) and
a module with its `RobotConfig` (the names of the parts the terms read) and the names a task
needs to address its joints. A config names its file `mjrl:robots/NAME.xml`, wherever mjrl is
installed. Tasks put a robot to work (`mjrl.tasks.velocity.go1`); this package registers no task."""
