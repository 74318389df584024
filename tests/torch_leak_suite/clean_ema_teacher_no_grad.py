"""An EMA teacher updated under torch.no_grad()."""
import torch
from suite_common import batches, mse, small_model

student = small_model()
teacher = small_model()
for parameter in teacher.parameters():
    parameter.requires_grad_(False)
optimizer = torch.optim.SGD(student.parameters(), lr=0.01)
for x, t in batches():
    with torch.no_grad():
        target = teacher(x)
    loss = mse(student(x), t) + mse(student(x), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for teacher_weight, student_weight in zip(teacher.parameters(), student.parameters()):
            teacher_weight.mul_(0.99).add_(0.01 * student_weight)
