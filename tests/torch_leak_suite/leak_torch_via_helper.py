"""torch only through a module of the script's own folder; the losses kept with their graphs."""
from suite_training import batches, make_trainer

train_step = make_trainer()
history = []
for x, t in batches():
    history.append(train_step(x, t))
