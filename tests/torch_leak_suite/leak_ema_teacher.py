"""An EMA teacher whose weights are updated outside torch.no_grad(): each update joins the graph."""
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
    for teacher_weight, student_weight in zip(teacher.parameters(), student.parameters()):
        teacher_weight.mul_(0.99).add_(0.01 * student_weight)  # no torch.no_grad()
